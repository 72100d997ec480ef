//! `task-topology`: a job's tasks that talk to each other (a parameter server and its workers)
//! are placed on the same nodes, and tasks that should not share a node are kept apart, as
//! the PodGroup's annotations `volcano.sh/task-topology-affinity`, `-anti-affinity` and
//! `-task-order` declare (a vcJob's annotations reach its PodGroup).
//!
//! The annotations:
//!
//! * `volcano.sh/task-topology-affinity: "ps,worker;chief"`: groups of tasks (by task name)
//!   to place together; a group of one task keeps that task's pods together;
//! * `volcano.sh/task-topology-anti-affinity: "ps"`: groups to keep apart (one task: its pods
//!   on different nodes);
//! * `volcano.sh/task-topology-task-order: "ps,worker"`: which task's pods go first.
//!
//! As Volcano's plugin: at session open, the job's pending pods of tasks named there are
//! sorted into *buckets* (pods that want each other's company, pods already on a node with
//! the bucket of that node); pods in a bucket go before others, larger buckets first. A node
//! scores higher for a pod the more of its bucket already sits there and the more of the
//! bucket's remaining pods the node could still hold, lower where a task it must avoid was
//! placed in this session. A task name in an annotation that the job does not have leaves
//! the job out (Volcano logs it). Argument: `task-topology.weight` (1).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::config::PluginOption;
use crate::framework::Plugin;
use crate::ix::{JobIx, NodeIx, TaskIx};
use crate::resource::Resource;
use crate::session::State;

/// The PodGroup annotation with the groups of tasks to place together.
pub const AFFINITY: &str = "volcano.sh/task-topology-affinity";
/// The PodGroup annotation with the groups of tasks to keep apart.
pub const ANTI_AFFINITY: &str = "volcano.sh/task-topology-anti-affinity";
/// The PodGroup annotation with the order of tasks.
pub const TASK_ORDER: &str = "volcano.sh/task-topology-task-order";

/// Kubernetes' highest node score, which bucket scores are scaled to.
const MAX_NODE_SCORE: f64 = 100.0;

/// The plugin.
#[derive(Debug)]
pub struct TaskTopology {
    weight: f64,
    jobs: HashMap<JobIx, JobTopology>,
}

impl TaskTopology {
    /// Reads `task-topology.weight`.
    pub fn new(o: &PluginOption) -> Self {
        Self {
            weight: o.float_arg("task-topology.weight", 1.0),
            jobs: HashMap::new(),
        }
    }
}

/// How strongly a task's rules pull it first among equals (Volcano's order: keeping its own
/// pods apart, then joining other tasks, then keeping its pods together, then avoiding
/// others).
#[derive(Clone, Copy)]
enum Kind {
    SelfAnti = 4,
    InterAffinity = 3,
    SelfAffinity = 2,
    InterAnti = 1,
}

/// One job's rules, by task name.
#[derive(Debug, Default)]
struct Rules {
    self_affinity: HashSet<String>,
    inter_affinity: HashMap<String, HashSet<String>>,
    self_anti: HashSet<String>,
    inter_anti: HashMap<String, HashSet<String>>,
    /// The strongest kind of rule naming the task.
    priority: HashMap<String, i32>,
    /// Position from the end in the task order (first named: highest).
    order: HashMap<String, i32>,
}

impl Rules {
    fn mark(&mut self, task: &str, kind: Kind) {
        let p = self.priority.entry(task.to_string()).or_default();
        *p = (*p).max(kind as i32);
    }

    fn groups(&mut self, groups: &[Vec<String>], single: Kind, pair: Kind, anti: bool) {
        for g in groups {
            if let [only] = g.as_slice() {
                if anti {
                    self.self_anti.insert(only.clone());
                } else {
                    self.self_affinity.insert(only.clone());
                }
                self.mark(only, single);
                continue;
            }
            for (i, a) in g.iter().enumerate() {
                for b in &g[..i] {
                    let map = if anti {
                        &mut self.inter_anti
                    } else {
                        &mut self.inter_affinity
                    };
                    map.entry(a.clone()).or_default().insert(b.clone());
                    map.entry(b.clone()).or_default().insert(a.clone());
                }
                self.mark(a, pair);
            }
        }
    }

    /// Volcano's `checkTaskSetAffinity`: how much `task` wants to join pods of the tasks
    /// counted in `set` (each pod of a task it likes counts +1, of one it must avoid -1;
    /// with `only_anti`, only the avoidance).
    fn affinity_to(&self, task: &str, set: &BTreeMap<String, i32>, only_anti: bool) -> i32 {
        let mut score = 0;
        for (other, &count) in set {
            let same = other == task;
            if !only_anti {
                let likes = if same {
                    self.self_affinity.contains(task)
                } else {
                    self.inter_affinity
                        .get(task)
                        .is_some_and(|s| s.contains(other))
                };
                if likes {
                    score += count;
                }
            }
            let avoids = if same {
                self.self_anti.contains(task)
            } else {
                self.inter_anti.get(task).is_some_and(|s| s.contains(other))
            };
            if avoids {
                score -= count;
            }
        }
        score
    }

    /// Which of two tasks' pods come first by the rules: `Greater` when `a`'s (Volcano's
    /// `taskAffinityOrder`).
    fn order(&self, a: &str, b: &str) -> Ordering {
        if a == b {
            return Ordering::Equal;
        }
        let o = |t: &str| self.order.get(t).copied().unwrap_or(0);
        let p = |t: &str| self.priority.get(t).copied().unwrap_or(0);
        o(a).cmp(&o(b)).then(p(a).cmp(&p(b)))
    }
}

/// Pods of one job that want each other's company.
#[derive(Debug, Default)]
struct Bucket {
    /// Its pods not on a node yet.
    pending: BTreeSet<TaskIx>,
    /// Pods per task name, placed or not.
    names: BTreeMap<String, i32>,
    /// What its pending pods request, and that as one number (millicores + MiB + scalars)
    /// to tell the lighter of two buckets.
    request: Resource,
    weight: f64,
    /// Its pods on a node.
    bound: i32,
    /// Its pods per node.
    nodes: HashMap<NodeIx, i32>,
}

impl Bucket {
    fn weigh(r: &Resource) -> f64 {
        r.milli_cpu + r.memory / 1024.0 / 1024.0 + r.scalars.values().sum::<f64>()
    }

    fn size(&self) -> i32 {
        self.pending.len() as i32 + self.bound
    }
}

/// One job's rules, buckets and what the session placed.
#[derive(Debug, Default)]
struct JobTopology {
    rules: Rules,
    buckets: Vec<Bucket>,
    bucket_of: HashMap<TaskIx, usize>,
    max_size: i32,
    /// Task names of the pods this session placed, per node.
    node_tasks: HashMap<NodeIx, BTreeMap<String, i32>>,
    /// Pods this session placed, with their nodes (to undo).
    placed: HashMap<TaskIx, NodeIx>,
    /// The job's pods without a node when the session opened.
    pending_at_open: HashSet<TaskIx>,
}

/// `"a,b;c"` as groups of task names; `Err` naming a task the job does not have, or a task
/// twice in one group.
fn groups(text: &str, roles: &BTreeSet<&str>) -> Result<Vec<Vec<String>>, String> {
    let groups: Vec<Vec<String>> = text
        .split(';')
        .map(|g| g.split(',').map(|t| t.trim().to_string()).collect())
        .collect();
    for g in &groups {
        let mut seen = HashSet::new();
        for t in g.iter().filter(|t| !t.is_empty()) {
            if !roles.contains(t.as_str()) {
                return Err(format!("task {t} does not exist"));
            }
            if !seen.insert(t) {
                return Err(format!("task {t} is named twice"));
            }
        }
    }
    Ok(groups)
}

/// The job's rules from its PodGroup's annotations; `None` without any, or when one names a
/// task the job does not have.
fn rules(st: &State, j: JobIx) -> Option<Rules> {
    let job = &st.jobs[j];
    let annotations = job.podgroup.metadata.annotations.as_ref()?;
    let (aff, anti, order) = (
        annotations.get(AFFINITY),
        annotations.get(ANTI_AFFINITY),
        annotations.get(TASK_ORDER),
    );
    if aff.is_none() && anti.is_none() && order.is_none() {
        return None;
    }
    let roles: BTreeSet<&str> = job
        .tasks
        .iter()
        .map(|&t| st.tasks[t].role.as_str())
        .collect();
    let mut r = Rules::default();
    if let Some(a) = aff {
        r.groups(
            &groups(a, &roles).ok()?,
            Kind::SelfAffinity,
            Kind::InterAffinity,
            false,
        );
    }
    if let Some(a) = anti {
        r.groups(
            &groups(a, &roles).ok()?,
            Kind::SelfAnti,
            Kind::InterAnti,
            true,
        );
    }
    if let Some(o) = order {
        let names = groups(o, &roles)
            .ok()?
            .into_iter()
            .next()
            .unwrap_or_default();
        let n = names.len() as i32;
        for (i, t) in names.into_iter().enumerate() {
            r.order.insert(t, n - i as i32);
        }
    }
    Some(r)
}

impl JobTopology {
    /// Sorts the job's pods of tasks with rules into buckets (Volcano's `ConstructBucket`):
    /// pods on nodes first (one bucket per node), then by the rules' order, each into the
    /// bucket it likes most (the lighter on a tie), or a new one when it likes none.
    fn build(st: &State, j: JobIx, rules: Rules) -> Self {
        let mut me = JobTopology {
            rules,
            pending_at_open: st.jobs[j]
                .tasks
                .iter()
                .copied()
                .filter(|&t| st.tasks[t].status == crate::model::TaskStatus::Pending)
                .collect(),
            ..JobTopology::default()
        };
        let node_of = |t: TaskIx| {
            st.tasks[t]
                .node
                .as_deref()
                .and_then(|n| st.node_index.get(n).copied())
        };
        let mut tasks: Vec<TaskIx> = st.jobs[j]
            .tasks
            .iter()
            .copied()
            .filter(|&t| {
                let role = &st.tasks[t].role;
                !role.is_empty() && me.rules.priority.contains_key(role)
            })
            .collect();
        // Placed pods first (by node name, descending as Volcano's reversed sort), then by
        // the rules' order, then by name descending.
        tasks.sort_by(|&a, &b| {
            let (ta, tb) = (&st.tasks[a], &st.tasks[b]);
            match (&ta.node, &tb.node) {
                (Some(x), Some(y)) => y.cmp(x),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => me
                    .rules
                    .order(&tb.role, &ta.role)
                    .then_with(|| tb.name.cmp(&ta.name)),
            }
        });
        let mut bucket_of_node: HashMap<NodeIx, usize> = HashMap::new();
        for t in tasks {
            let task = &st.tasks[t];
            let node = node_of(t);
            let chosen = match node {
                Some(n) => bucket_of_node.get(&n).copied(),
                None => {
                    let mut best: Option<(i32, usize)> = None;
                    for (i, b) in me.buckets.iter().enumerate() {
                        let aff = me.rules.affinity_to(&task.role, &b.names, false);
                        let better = match best {
                            None => true,
                            Some((m, k)) => {
                                aff > m || (aff == m && b.weight < me.buckets[k].weight)
                            }
                        };
                        if better {
                            best = Some((aff, i));
                        }
                    }
                    best.filter(|(aff, _)| *aff >= 0).map(|(_, i)| i)
                }
            };
            let i = chosen.unwrap_or_else(|| {
                me.buckets.push(Bucket::default());
                let i = me.buckets.len() - 1;
                if let Some(n) = node {
                    bucket_of_node.insert(n, i);
                }
                i
            });
            let b = &mut me.buckets[i];
            *b.names.entry(task.role.clone()).or_default() += 1;
            match node {
                Some(n) => {
                    *b.nodes.entry(n).or_default() += 1;
                    b.bound += 1;
                }
                None => {
                    b.pending.insert(t);
                    b.request.add(&task.resreq);
                    b.weight += Bucket::weigh(&task.resreq);
                }
            }
            me.bucket_of.insert(t, i);
            me.max_size = me.max_size.max(b.size());
        }
        me
    }

    fn bucket(&self, t: TaskIx) -> Option<&Bucket> {
        self.bucket_of.get(&t).map(|&i| &self.buckets[i])
    }

    /// A pod of the job went to node `n` (`+1`) or came off it (`-1`).
    fn moved(&mut self, st: &State, t: TaskIx, n: NodeIx, sign: i32) {
        let task = &st.tasks[t];
        if !task.role.is_empty() {
            let set = self.node_tasks.entry(n).or_default();
            *set.entry(task.role.clone()).or_default() += sign;
        }
        if let Some(&i) = self.bucket_of.get(&t) {
            let b = &mut self.buckets[i];
            *b.nodes.entry(n).or_default() += sign;
            b.bound += sign;
            if sign > 0 {
                b.pending.remove(&t);
                b.request.sub(&task.resreq);
                b.weight -= Bucket::weigh(&task.resreq);
            } else {
                b.pending.insert(t);
                b.request.add(&task.resreq);
                b.weight += Bucket::weigh(&task.resreq);
            }
        }
    }

    /// Volcano's `calcBucketScore` for pod `t` on node `n`.
    fn score(&self, st: &State, t: TaskIx, n: NodeIx) -> i32 {
        let node = &st.nodes[n];
        let mut room = node.idle();
        room.add(&node.releasing);
        let task = &st.tasks[t];
        if !task.resreq.less_equal(&room) {
            return 0;
        }
        let Some(b) = self.bucket(t) else {
            return 0;
        };
        let mut score = b.nodes.get(&n).copied().unwrap_or(0);
        if let Some(set) = self.node_tasks.get(&n) {
            let avoid = self.rules.affinity_to(&task.role, set, true);
            if avoid < 0 {
                score += avoid;
            }
        }
        score += b.pending.len() as i32;
        if b.request.less_equal(&room) {
            return score;
        }
        // The node cannot hold the whole bucket: one point less for each other pod that
        // would not fit.
        let mut remains = b.request.clone();
        for &other in b.pending.iter().filter(|&&o| o != t) {
            remains.sub(&st.tasks[other].resreq);
            score -= 1;
            if remains.less_equal(&room) {
                break;
            }
        }
        score
    }
}

impl Plugin for TaskTopology {
    fn name(&self) -> &'static str {
        "task-topology"
    }

    fn open(&mut self, st: &State) {
        self.jobs.clear();
        for j in st.jobs.indices() {
            let has_pending = st.jobs[j]
                .tasks
                .iter()
                .any(|&t| st.tasks[t].status == crate::model::TaskStatus::Pending);
            if !has_pending {
                continue;
            }
            if let Some(rules) = rules(st, j) {
                self.jobs.insert(j, JobTopology::build(st, j, rules));
            }
        }
    }

    fn task_order(&self, st: &State, a: TaskIx, b: TaskIx) -> Option<Ordering> {
        let (ja, jb) = (st.task_job[a], st.task_job[b]);
        let (ma, mb) = (self.jobs.get(&ja)?, self.jobs.get(&jb)?);
        let (ba, bb) = (ma.bucket_of.get(&a), mb.bucket_of.get(&b));
        match (ba, bb) {
            (Some(_), None) => return Some(Ordering::Less),
            (None, Some(_)) => return Some(Ordering::Greater),
            (None, None) => return None,
            (Some(_), Some(_)) if ja != jb => return None,
            _ => {}
        }
        let (ia, ib) = (ba?, bb?);
        let (size_a, size_b) = (ma.buckets[*ia].pending.len(), ma.buckets[*ib].pending.len());
        if size_a != size_b {
            return Some(size_b.cmp(&size_a));
        }
        if ia == ib {
            return Some(ma.rules.order(&st.tasks[b].role, &st.tasks[a].role));
        }
        Some(ia.cmp(ib))
    }

    fn node_score(&self, st: &State, t: TaskIx, n: NodeIx) -> f64 {
        let Some(m) = self.jobs.get(&st.task_job[t]) else {
            return 0.0;
        };
        let mut s = m.score(st, t, n) as f64 * self.weight;
        if m.max_size != 0 {
            s = s * MAX_NODE_SCORE / m.max_size as f64;
        }
        s
    }

    fn on_allocate(&mut self, st: &State, t: TaskIx) {
        let Some(m) = self.jobs.get_mut(&st.task_job[t]) else {
            return;
        };
        // Only pods pending when the session opened: an eviction undone calls this for a pod
        // that was on its node all along.
        if !m.pending_at_open.contains(&t) || m.placed.contains_key(&t) {
            return;
        }
        let Some(n) = st.tasks[t]
            .node
            .as_deref()
            .and_then(|n| st.node_index.get(n).copied())
        else {
            return;
        };
        m.placed.insert(t, n);
        m.moved(st, t, n, 1);
    }

    fn on_deallocate(&mut self, st: &State, t: TaskIx) {
        let Some(m) = self.jobs.get_mut(&st.task_job[t]) else {
            return;
        };
        if let Some(n) = m.placed.remove(&t) {
            m.moved(st, t, n, -1);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use crate::config::parse;
    use crate::outcome::run_session;
    use crate::testing::{self, World};

    /// Spreading (`nodeorder`'s least-allocated) or packing (`binpack`), with and without
    /// `task-topology`.
    fn conf(scorer: &str, topology: bool) -> String {
        let mut c = format!(
            "actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n\
             - plugins:\n  - name: predicates\n  - name: proportion\n  - name: {scorer}\n"
        );
        if topology {
            c.push_str("  - name: task-topology\n    arguments: {task-topology.weight: 10}\n");
        }
        c
    }

    /// Four 4-cpu nodes and one job: `ps` pods and `worker` pods of 1 cpu, with the
    /// PodGroup annotations given.
    fn world(ps: usize, workers: usize, annotations: &[(&str, &str)]) -> World {
        let mut w = World::default().nodes(4, 4, 16);
        let mut pg = testing::with_phase(
            testing::podgroup("ns", "j", "default", (ps + workers) as i32, None),
            "Inqueue",
        );
        pg.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        w.index.apply_podgroup(&pg);
        for (role, n) in [("ps", ps), ("worker", workers)] {
            for i in 0..n {
                let mut p = testing::pod("ns", &format!("j-{role}-{i}"), "j", 1000, 64);
                p.metadata
                    .annotations
                    .get_or_insert_default()
                    .insert("volcano.sh/task-spec".into(), role.into());
                w.index.apply_pod(&p);
            }
        }
        w
    }

    fn placed(w: &World, conf: &str) -> BTreeMap<String, String> {
        let conf = parse(conf, "test").expect("conf");
        let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        run_session(w.index.snapshot(), &conf, "s", now)
            .plan
            .placements
            .values()
            .map(|p| (p.name.clone(), p.node.clone()))
            .collect()
    }

    fn nodes(p: &BTreeMap<String, String>) -> BTreeSet<&str> {
        p.values().map(String::as_str).collect()
    }

    #[test]
    fn tasks_with_affinity_share_a_node_where_the_spread_would_scatter_them() {
        let w = world(1, 3, &[(super::AFFINITY, "ps,worker")]);
        let spread = placed(&w, &conf("nodeorder", false));
        assert_eq!(nodes(&spread).len(), 4, "{spread:?}");
        let together = placed(&w, &conf("nodeorder", true));
        assert_eq!(together.len(), 4);
        assert_eq!(nodes(&together).len(), 1, "{together:?}");
    }

    #[test]
    fn a_task_kept_apart_from_itself_spreads_where_binpack_would_pile_it() {
        let w = world(0, 3, &[(super::ANTI_AFFINITY, "worker")]);
        let packed = placed(&w, &conf("binpack", false));
        assert_eq!(nodes(&packed).len(), 1, "{packed:?}");
        let apart = placed(&w, &conf("binpack", true));
        assert_eq!(apart.len(), 3);
        assert_eq!(nodes(&apart).len(), 3, "{apart:?}");
    }

    #[test]
    fn annotations_naming_a_task_the_job_lacks_leave_the_job_alone() {
        let w = world(1, 3, &[(super::AFFINITY, "ps,launcher")]);
        let p = placed(&w, &conf("nodeorder", true));
        assert_eq!(nodes(&p).len(), 4, "as without the plugin: {p:?}");
    }

    #[test]
    fn groups_are_read_and_checked() {
        let roles: BTreeSet<&str> = ["ps", "worker"].into();
        assert_eq!(
            super::groups("ps,worker;worker", &roles),
            Ok(vec![
                vec!["ps".to_string(), "worker".to_string()],
                vec!["worker".to_string()]
            ])
        );
        assert!(super::groups("ps,ps", &roles).is_err());
        assert!(super::groups("chief", &roles).is_err());
    }
}
