//! Which pods belong to which job, fed by the pod watch, so a sync reads a job's pods
//! instead of scanning every pod in the cluster. Pods are keyed by their
//! `volcano.sh/job-name` annotation, as Volcano's job cache keys them.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::runtime::watcher;

use crate::api::keys;

/// `(namespace, job)` → pod names.
#[derive(Debug, Default)]
pub struct JobPodIndex {
    jobs: HashMap<(String, String), BTreeSet<String>>,
    relist: Option<Vec<(String, String, String)>>,
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

impl JobPodIndex {
    fn insert(&mut self, ns: String, job: String, pod: String) {
        self.jobs.entry((ns, job)).or_default().insert(pod);
    }

    fn remove(&mut self, ns: &str, job: &str, pod: &str) {
        let key = (ns.to_string(), job.to_string());
        if let Some(set) = self.jobs.get_mut(&key) {
            set.remove(pod);
            if set.is_empty() {
                self.jobs.remove(&key);
            }
        }
    }

    /// Names of the pods of a job.
    pub fn pods_of(&self, namespace: &str, job: &str) -> Vec<String> {
        self.jobs
            .get(&(namespace.to_string(), job.to_string()))
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Applies one watch event.
    pub fn on_event(&mut self, ev: &watcher::Event<Pod>) {
        match ev {
            watcher::Event::Apply(p) => {
                if let Some(job) = job_of(p) {
                    self.insert(
                        p.namespace().unwrap_or_default(),
                        job.to_string(),
                        p.name_any(),
                    );
                }
            }
            watcher::Event::Delete(p) => {
                if let Some(job) = job_of(p) {
                    self.remove(&p.namespace().unwrap_or_default(), job, &p.name_any());
                }
            }
            watcher::Event::Init => self.relist = Some(Vec::new()),
            watcher::Event::InitApply(p) => {
                if let Some(job) = job_of(p) {
                    self.relist.get_or_insert_with(Vec::new).push((
                        p.namespace().unwrap_or_default(),
                        job.to_string(),
                        p.name_any(),
                    ));
                }
            }
            watcher::Event::InitDone => {
                let list = self.relist.take().unwrap_or_default();
                self.jobs.clear();
                for (ns, job, pod) in list {
                    self.insert(ns, job, pod);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

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
        i.on_event(&watcher::Event::Apply(pod("a-w-0", Some("a"))));
        i.on_event(&watcher::Event::Apply(pod("a-w-1", Some("a"))));
        i.on_event(&watcher::Event::Apply(pod("plain", None)));
        assert_eq!(i.pods_of("ns", "a"), vec!["a-w-0", "a-w-1"]);
        i.on_event(&watcher::Event::Delete(pod("a-w-0", Some("a"))));
        assert_eq!(i.pods_of("ns", "a"), vec!["a-w-1"]);
        i.on_event(&watcher::Event::Init);
        i.on_event(&watcher::Event::InitApply(pod("b-w-0", Some("b"))));
        // Until the relist is done the old view stands.
        assert_eq!(i.pods_of("ns", "a"), vec!["a-w-1"]);
        i.on_event(&watcher::Event::InitDone);
        assert!(i.pods_of("ns", "a").is_empty());
        assert_eq!(i.pods_of("ns", "b"), vec!["b-w-0"]);
    }
}
