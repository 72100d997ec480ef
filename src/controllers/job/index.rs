//! Which pods belong to which job, fed by the pod watch, so a sync reads a job's pods
//! instead of scanning every pod in the cluster. Pods are keyed by their
//! `volcano.sh/job-name` annotation, as Volcano's job cache keys them.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use crate::api::keys;
use crate::cluster::Index;

/// `(namespace, job)` → pod names; an [`Index`] of the pod watch, fed through a
/// [`Relist`](crate::cluster::Relist).
#[derive(Debug, Default)]
pub struct JobPodIndex {
    jobs: HashMap<(String, String), BTreeSet<String>>,
}

/// The job a pod belongs to, by its annotation.
pub fn job_of(pod: &Pod) -> Option<&str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(keys::JOB_NAME)
        .map(String::as_str)
        .filter(|j| !j.is_empty())
}

/// A pod of a job, as [`JobPodIndex`] keeps it: `(namespace, job)` and its name.
type Member = ((String, String), String);

/// The job a pod is a member of, and its name; `None` for a pod of no job.
fn member(pod: &Pod) -> Option<Member> {
    let job = job_of(pod)?;
    Some((
        (pod.namespace().unwrap_or_default(), job.to_string()),
        pod.name_any(),
    ))
}

impl JobPodIndex {
    fn insert(&mut self, (key, name): Member) {
        self.jobs.entry(key).or_default().insert(name);
    }

    /// The jobs that have pods, as `(namespace, job)`.
    pub fn jobs(&self) -> impl Iterator<Item = &(String, String)> {
        self.jobs.keys()
    }

    /// Names of the pods of a job.
    pub fn pods_of(&self, namespace: &str, job: &str) -> Vec<String> {
        self.jobs
            .get(&(namespace.to_string(), job.to_string()))
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
}

impl Index<Pod> for JobPodIndex {
    /// Only a job's pods, and of them only the names.
    type Taken = Option<Member>;

    fn take(pod: &Pod) -> Option<Member> {
        member(pod)
    }

    fn apply(&mut self, member: Option<Member>) {
        if let Some(m) = member {
            self.insert(m);
        }
    }

    fn delete(&mut self, pod: &Pod) {
        let Some((key, name)) = member(pod) else {
            return;
        };
        if let Some(set) = self.jobs.get_mut(&key) {
            set.remove(&name);
            if set.is_empty() {
                self.jobs.remove(&key);
            }
        }
    }

    fn reset(&mut self, all: Vec<Option<Member>>) {
        self.jobs.clear();
        for m in all.into_iter().flatten() {
            self.insert(m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Relist;
    use kube::api::ObjectMeta;
    use kube::runtime::watcher;

    fn pod(name: &str, job: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                annotations: job.map(|j| [(keys::JOB_NAME.to_string(), j.to_string())].into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[test]
    fn follows_adds_deletes_and_relists() {
        let mut i = JobPodIndex::default();
        let mut relist = Relist::default();
        let mut feed = |i: &mut JobPodIndex, ev| relist.feed(i, &ev);
        feed(&mut i, watcher::Event::Apply(pod("a-w-0", Some("a"))));
        feed(&mut i, watcher::Event::Apply(pod("a-w-1", Some("a"))));
        feed(&mut i, watcher::Event::Apply(pod("plain", None)));
        assert_eq!(i.pods_of("ns", "a"), vec!["a-w-0", "a-w-1"]);
        feed(&mut i, watcher::Event::Delete(pod("a-w-0", Some("a"))));
        assert_eq!(i.pods_of("ns", "a"), vec!["a-w-1"]);
        feed(&mut i, watcher::Event::Init);
        feed(&mut i, watcher::Event::InitApply(pod("b-w-0", Some("b"))));
        feed(&mut i, watcher::Event::InitApply(pod("plain", None)));
        // Until the relist is done the old view stands.
        assert_eq!(i.pods_of("ns", "a"), vec!["a-w-1"]);
        feed(&mut i, watcher::Event::InitDone);
        assert!(i.pods_of("ns", "a").is_empty());
        assert_eq!(i.pods_of("ns", "b"), vec!["b-w-0"]);
    }
}
