//! While the allocate action runs: for each kind of task it has searched every node for, which
//! nodes that kind fits and why each other node does not, kept current as nodes fill and empty.
//!
//! Why: a search visits nodes until it has found enough that fit, so when few do (a pool of 20
//! nodes chosen by a node selector in a cluster of 2,000) every search visits every node. With
//! a thousand gangs waiting for that pool, most of a scheduling pass went to those searches,
//! and a gang given up midway (a few of its pods placed, then no room) cost two of them.
//!
//! A kind of task is what the node predicates read of it: its queue (a queue's node groups),
//! its request, and its node selector, required node affinity, tolerations, host ports and
//! node name. Tasks of one kind fit the same nodes for the same reasons, whatever their job. A
//! node's answer changes only when the node does, and during allocate that is when a task is
//! placed on it or taken off again: those nodes are logged ([`KindFits::changed`]) and looked
//! at again for a kind the next time it is asked for ([`crate::session::Session::known_fits`]).
//! So a search of every node is made once per kind, and after that only the nodes that changed
//! are predicated again; the answer is the one a search of every node would give.
//!
//! With required pod anti-affinity on any task, where a pod fits depends on other pods in the
//! node's whole topology domain and on pods' labels: then nothing is remembered.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::ix::{Ix, NodeIx, QueueIx, TaskIx};
use crate::model::{Constraints, TaskInfo};
use crate::resource::Resource;
use crate::session::{FitErrors, State};

/// The kinds remembered, and the nodes changed since the allocate action began.
#[derive(Debug)]
pub struct KindFits {
    kinds: Vec<KindFit>,
    /// Every node a task was placed on or taken off, in order (with repeats).
    changed: Vec<NodeIx>,
    /// Some task has required pod anti-affinity: nothing is remembered.
    off: bool,
}

/// What one kind of task fits.
#[derive(Debug)]
pub(crate) struct KindFit {
    queue: QueueIx,
    resreq: Resource,
    constraints: Arc<Constraints>,
    /// A task of the kind: it is predicated for its kind when nodes change.
    pub(crate) task: TaskIx,
    /// The nodes it fits.
    pub(crate) fits: BTreeSet<NodeIx>,
    /// Why each other node does not.
    pub(crate) errors: FitErrors,
    /// How much of [`KindFits::changed`] `fits` and `errors` account for.
    pub(crate) seen: usize,
}

impl KindFits {
    /// Kinds kept at most; the oldest goes first.
    const MAX: usize = 64;

    /// An empty memory for one allocate action over `st`.
    pub fn new(st: &State) -> Self {
        Self {
            kinds: Vec::new(),
            changed: Vec::new(),
            off: st.anti_affinity,
        }
    }

    /// Whether kinds are remembered at all (see the module's last paragraph).
    pub fn on(&self) -> bool {
        !self.off
    }

    /// Node `n` gained or lost a task.
    pub fn changed(&mut self, n: NodeIx) {
        if !self.off {
            self.changed.push(n);
        }
    }

    /// Remembers what a search of every node found for task `t` (`task`) of queue `q`: the
    /// nodes it fits and why the others do not.
    pub fn remember(
        &mut self,
        q: QueueIx,
        t: TaskIx,
        task: &TaskInfo,
        fits: BTreeSet<NodeIx>,
        errors: FitErrors,
    ) {
        if self.off {
            return;
        }
        if self.kinds.len() >= Self::MAX {
            self.kinds.remove(0);
        }
        self.kinds.push(KindFit {
            queue: q,
            resreq: task.resreq.clone(),
            constraints: task.constraints.clone(),
            task: t,
            fits,
            errors,
            seen: self.changed.len(),
        });
    }

    /// The kind of `task` of queue `q`, and the nodes changed since it was last brought up to
    /// date (each once, in order); the caller predicates them and calls [`KindFit::update`].
    pub(crate) fn kind_of(
        &mut self,
        q: QueueIx,
        task: &TaskInfo,
    ) -> Option<(&mut KindFit, Vec<NodeIx>)> {
        let i = self.kinds.iter().position(|k| {
            k.queue == q
                && k.resreq == task.resreq
                && (Arc::ptr_eq(&k.constraints, &task.constraints)
                    || k.constraints.same_for_nodes(&task.constraints))
        })?;
        let k = &mut self.kinds[i];
        let mut stale: Vec<NodeIx> = self.changed[k.seen..].to_vec();
        stale.sort_unstable();
        stale.dedup();
        k.seen = self.changed.len();
        Some((k, stale))
    }
}

impl KindFit {
    /// Records node `n`'s answer for the kind now: fits, or why not.
    pub(crate) fn update(&mut self, n: NodeIx, node: &str, answer: Result<(), String>) {
        match answer {
            Ok(()) => {
                self.fits.insert(n);
                self.errors.remove(node);
            }
            Err(reason) => {
                self.fits.remove(&n);
                self.errors.set(node, reason);
            }
        }
    }

    /// Up to `want` fitting nodes in the order a search from `cursor` over `n_nodes` nodes
    /// visits them, and how many nodes that search would have visited (all of them when it
    /// finds fewer than `want`).
    pub(crate) fn pick(&self, cursor: usize, want: usize, n_nodes: usize) -> (Vec<NodeIx>, usize) {
        let from = NodeIx::new(cursor.min(n_nodes));
        let picked: Vec<NodeIx> = self
            .fits
            .range(from..)
            .chain(self.fits.range(..from))
            .take(want)
            .copied()
            .collect();
        let visited = match picked.last() {
            Some(last) if picked.len() == want => (last.index() + n_nodes - cursor) % n_nodes + 1,
            _ => n_nodes,
        };
        (picked, visited)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(fits: &[usize]) -> KindFit {
        KindFit {
            queue: QueueIx::new(0),
            resreq: Resource::zero(),
            constraints: Arc::new(Constraints::default()),
            task: TaskIx::new(0),
            fits: fits.iter().map(|&i| NodeIx::new(i)).collect(),
            errors: FitErrors::default(),
            seen: 0,
        }
    }

    fn ix(v: &[NodeIx]) -> Vec<usize> {
        v.iter().map(|n| n.index()).collect()
    }

    #[test]
    fn picking_visits_the_nodes_as_a_search_from_the_cursor_would() {
        let k = kind(&[1, 4, 7, 9]);
        // From node 5 of 10: 7 and 9, then round to 1; the third found is the 7th visited.
        let (picked, visited) = k.pick(5, 3, 10);
        assert_eq!(ix(&picked), vec![7, 9, 1]);
        assert_eq!(visited, 7);
        // Fewer fit than wanted: every node is visited.
        let (picked, visited) = k.pick(5, 10, 10);
        assert_eq!(ix(&picked), vec![7, 9, 1, 4]);
        assert_eq!(visited, 10);
        // The cursor on a fitting node finds it first.
        let (picked, visited) = k.pick(4, 1, 10);
        assert_eq!(ix(&picked), vec![4]);
        assert_eq!(visited, 1);
    }

    #[test]
    fn a_node_that_changed_is_moved_between_fits_and_errors() {
        let mut k = kind(&[1]);
        k.update(NodeIx::new(1), "n1", Err("Insufficient cpu".into()));
        assert!(k.fits.is_empty());
        assert_eq!(
            k.errors.message(),
            "0/1 nodes are unavailable: 1 Insufficient cpu."
        );
        k.update(NodeIx::new(1), "n1", Ok(()));
        assert_eq!(ix(&k.fits.iter().copied().collect::<Vec<_>>()), vec![1]);
        assert!(k.errors.nodes.is_empty());
    }
}
