//! What every job request is processed with: the client, the shared caches, this
//! controller's pod index, and what it wrote that the caches may not show yet.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;

use super::JobConfig;
use super::coalesce::Coalescer;
use super::delay::DelayedActions;
use super::index::JobPodIndex;
use super::metrics::JobMetrics;
use super::request::Request;
use crate::api::{Job, PodGroup, Queue};
use crate::cluster::Caches;
use crate::cluster::events::{EventRecorder, EventType, object_ref};
use crate::controllers::workqueue::WorkQueue;
use crate::controllers::{ControllerMetrics, KubeOp};
use crate::sync::lock;

/// Writes of this controller the watch has not delivered yet. Without them a request right
/// after a write would decide on the old object: write a status again on a stale
/// resourceVersion (a 409), create a pod or PodGroup again (AlreadyExists). Entries go once
/// the cache has caught up.
#[derive(Debug, Default)]
pub(crate) struct Inflight {
    jobs: HashMap<(String, String), Job>,
    podgroups: HashMap<(String, String), PodGroup>,
    /// Pods created that the cache does not list yet.
    created: Created,
    /// Pods deleted (by uid) that the cache still lists.
    deleted: HashSet<String>,
    /// The last version the watch showed of each job pod, to tell what an update changed
    /// (the shared store already holds the new one when subscribers run). Shared with the
    /// store, not copied: a copy of every job pod doubled the memory the pods take.
    last_pods: HashMap<(String, String), Arc<Pod>>,
    /// The last PodGroupPending message recorded per job, so the Event is recorded when the
    /// reason changes, not on every sync as Volcano does.
    pg_pending: HashMap<(String, String), String>,
    /// ConfigMap data last written, by namespace/name.
    config_maps: HashMap<(String, String), std::collections::BTreeMap<String, String>>,
}

/// Pods this controller created that the cache does not list yet, by namespace/name and by
/// the job that owns them: a job's sync looks at its own, not at every pod of a burst.
#[derive(Debug, Default)]
struct Created {
    pods: HashMap<(String, String), Arc<Pod>>,
    /// namespace/name of the pods, by the uid of their job.
    by_job: HashMap<String, HashSet<(String, String)>>,
}

impl Created {
    fn insert(&mut self, pod: &Pod) {
        let key = (pod.namespace().unwrap_or_default(), pod.name_any());
        if let Some(job) = owner_job(pod) {
            self.by_job
                .entry(job.to_string())
                .or_default()
                .insert(key.clone());
        }
        if let Some(old) = self.pods.insert(key.clone(), Arc::new(pod.clone()))
            && owner_job(&old) != owner_job(pod)
        {
            self.unlink(&old, &key);
        }
    }

    fn get(&self, key: &(String, String)) -> Option<&Arc<Pod>> {
        self.pods.get(key)
    }

    /// Forgets the pod at `key` if it is the one with `uid` (`None`: whichever it is).
    fn settle(&mut self, key: &(String, String), uid: Option<&str>) {
        if self
            .pods
            .get(key)
            .is_some_and(|c| uid.is_none_or(|u| c.metadata.uid.as_deref() == Some(u)))
            && let Some(old) = self.pods.remove(key)
        {
            self.unlink(&old, key);
        }
    }

    fn unlink(&mut self, pod: &Pod, key: &(String, String)) {
        if let Some(job) = owner_job(pod)
            && let Some(keys) = self.by_job.get_mut(job)
        {
            keys.remove(key);
            if keys.is_empty() {
                self.by_job.remove(job);
            }
        }
    }

    /// The pods of the job with `uid`.
    fn of_job<'a>(&'a self, uid: &str) -> impl Iterator<Item = &'a Arc<Pod>> + 'a {
        self.by_job
            .get(uid)
            .into_iter()
            .flatten()
            .filter_map(|k| self.pods.get(k))
    }
}

/// Whether `cached` is older than `written` by resourceVersion. Kube-apiserver's (etcd
/// revisions) and the embedded API's are increasing integers; anything else counts as caught
/// up, so the cache wins.
pub(crate) fn older(cached: Option<&str>, written: Option<&str>) -> bool {
    let parse = |s: Option<&str>| s?.parse::<u64>().ok();
    matches!((parse(cached), parse(written)), (Some(c), Some(w)) if c < w)
}

/// The job workers' queues: a job always goes to the same one.
#[derive(Clone, Debug)]
pub struct Router {
    queues: Vec<WorkQueue<Request>>,
    /// Stamps of the queued requests, and the syncs that cover them.
    pub(crate) coalescer: Arc<Coalescer>,
}

/// FNV-32 (the original, multiply-then-xor; not FNV-1a) of `bytes`, as Volcano's `genHash`
/// uses to spread jobs over workers. Written out here because the `fnv` crate only has 1a.
pub fn fnv32(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in bytes {
        h = h.wrapping_mul(0x0100_0193);
        h ^= u32::from(*b);
    }
    h
}

/// The worker (0-based) of job `namespace/name` among `workers`.
pub fn worker_of(key: &str, workers: usize) -> usize {
    (fnv32(key.as_bytes()) as usize) % workers.max(1)
}

impl Router {
    /// `workers` queues, stopping with `shutdown`.
    pub fn new(workers: usize, shutdown: &CancellationToken) -> Self {
        Self {
            queues: (0..workers.max(1))
                .map(|_| WorkQueue::new(shutdown.clone()))
                .collect(),
            coalescer: Arc::default(),
        }
    }

    /// The queue of a job.
    pub fn queue_of(&self, req: &Request) -> &WorkQueue<Request> {
        &self.queues[worker_of(&req.key(), self.queues.len())]
    }

    /// Queues a request on its job's worker, stamped so that a sync of the job starting
    /// after this covers it (see [`Coalescer`]).
    pub fn add(&self, req: Request) {
        self.coalescer.queued(&req);
        self.queue_of(&req).add(req);
    }

    /// Every queue, by worker.
    pub fn queues(&self) -> &[WorkQueue<Request>] {
        &self.queues
    }
}

/// Everything a request is processed with.
pub struct Context {
    pub(crate) client: Client,
    pub(crate) caches: Caches,
    pub(crate) config: JobConfig,
    pub(crate) index: Arc<Mutex<JobPodIndex>>,
    pub(crate) inflight: Arc<Mutex<Inflight>>,
    pub(crate) delays: Arc<DelayedActions>,
    pub(crate) recorder: EventRecorder,
    pub(crate) metrics: JobMetrics,
    pub(crate) base: ControllerMetrics,
    pub(crate) router: Router,
    /// Pods whose deletion failed, retried with backoff.
    pub(crate) retry_deletes: WorkQueue<(String, String)>,
    pub(crate) shutdown: CancellationToken,
    /// Workers start only once this replica leads.
    pub(crate) leadership: crate::leader::Leadership,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").finish_non_exhaustive()
    }
}

impl Context {
    pub(crate) fn inflight(&self) -> MutexGuard<'_, Inflight> {
        lock(&self.inflight)
    }

    /// The job as the cache has it, or as this controller last wrote it while the cache lags.
    pub(crate) fn job(&self, namespace: &str, name: &str) -> Option<Job> {
        let cached = self
            .caches
            .jobs()
            .get(&ObjectRef::<DeserializeGuard<Job>>::new(name).within(namespace))
            .and_then(|g| g.0.as_ref().ok().cloned());
        let key = (namespace.to_string(), name.to_string());
        let mut w = self.inflight();
        match (cached, w.jobs.get(&key)) {
            (Some(c), Some(mine))
                if c.metadata.uid == mine.metadata.uid
                    && older(
                        c.metadata.resource_version.as_deref(),
                        mine.metadata.resource_version.as_deref(),
                    ) =>
            {
                Some(mine.clone())
            }
            (c, _) => {
                w.jobs.remove(&key);
                c
            }
        }
    }

    /// Records a job this controller wrote (the API's answer).
    pub(crate) fn remember_job(&self, job: &Job) {
        let key = (job.namespace().unwrap_or_default(), job.name_any());
        self.inflight().jobs.insert(key, job.clone());
    }

    /// Drops what was remembered of a job (after a conflict, a fresh read replaces it).
    pub(crate) fn forget_job(&self, namespace: &str, name: &str) {
        self.inflight()
            .jobs
            .remove(&(namespace.to_string(), name.to_string()));
    }

    /// A PodGroup, from the cache or this controller's last write.
    pub(crate) fn podgroup(&self, namespace: &str, name: &str) -> Option<PodGroup> {
        let cached = self
            .caches
            .podgroups()
            .get(&ObjectRef::<DeserializeGuard<PodGroup>>::new(name).within(namespace))
            .and_then(|g| g.0.as_ref().ok().cloned());
        let key = (namespace.to_string(), name.to_string());
        let mut w = self.inflight();
        match (cached, w.podgroups.get(&key)) {
            (None, Some(mine)) => Some(mine.clone()),
            (Some(c), Some(mine))
                if older(
                    c.metadata.resource_version.as_deref(),
                    mine.metadata.resource_version.as_deref(),
                ) =>
            {
                // Our spec, the scheduler's status as the cache has it.
                let mut merged = mine.clone();
                merged.status = c.status.clone();
                Some(merged)
            }
            (c, _) => {
                w.podgroups.remove(&key);
                c
            }
        }
    }

    pub(crate) fn remember_podgroup(&self, pg: &PodGroup) {
        let key = (pg.namespace().unwrap_or_default(), pg.name_any());
        self.inflight().podgroups.insert(key, pg.clone());
    }

    pub(crate) fn forget_podgroup(&self, namespace: &str, name: &str) {
        self.inflight()
            .podgroups
            .remove(&(namespace.to_string(), name.to_string()));
    }

    /// A queue from the cache.
    pub(crate) fn queue(&self, name: &str) -> Option<Queue> {
        self.caches
            .queues()
            .get(&ObjectRef::<DeserializeGuard<Queue>>::new(name))
            .and_then(|g| g.0.as_ref().ok().cloned())
    }

    /// The value of a PriorityClass.
    pub(crate) fn priority(&self, name: &str) -> Option<i32> {
        self.caches
            .priority_classes()
            .get(&ObjectRef::new(name))
            .and_then(|pc| pc.value)
    }

    /// A pod from the cache (or created by this controller and not yet listed), shared.
    pub(crate) fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        if let Some(p) = self.caches.pod(namespace, name) {
            return Some(p);
        }
        self.inflight()
            .created
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// The pods of a job incarnation (controller ownerRef uid = the job's): the cache's, plus
    /// pods created but not listed yet; pods deleted but still listed come with a
    /// deletionTimestamp so they count as terminating. Shared with the cache: only a pod
    /// given that mark is copied.
    pub(crate) fn pods_of(&self, job: &Job) -> Vec<Arc<Pod>> {
        let ns = job.namespace().unwrap_or_default();
        let name = job.name_any();
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let names = lock(&self.index).pods_of(&ns, &name);
        let mut out = Vec::with_capacity(names.len());
        let mut seen = HashSet::new();
        let mut w = self.inflight();
        for n in names {
            let Some(mut p) = self.caches.pod(&ns, &n) else {
                continue;
            };
            if !owned_by(&p, &uid) {
                continue;
            }
            let key = (ns.clone(), n.clone());
            w.created.settle(&key, p.metadata.uid.as_deref());
            if let Some(u) = &p.metadata.uid
                && w.deleted.contains(u)
                && p.metadata.deletion_timestamp.is_none()
            {
                Arc::make_mut(&mut p).metadata.deletion_timestamp =
                    Some(Time(k8s_openapi::jiff::Timestamp::now()));
            }
            seen.insert(n);
            out.push(p);
        }
        out.extend(
            w.created
                .of_job(&uid)
                .filter(|p| p.metadata.namespace.as_deref() == Some(ns.as_str()))
                .filter(|p| !seen.contains(p.metadata.name.as_deref().unwrap_or_default()))
                .cloned(),
        );
        out
    }

    /// The cached pods of `job`'s incarnation in the same task as `pod` (shared, not copied).
    /// Pods created but not listed yet are left out: they have no status, so they neither
    /// succeeded nor restarted, which is all the callers count.
    pub(crate) fn task_pods(&self, job: &Job, pod: &Pod) -> Vec<Arc<Pod>> {
        let ns = job.namespace().unwrap_or_default();
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let task = Some(
            pod.annotations()
                .get(crate::api::keys::TASK_SPEC)
                .cloned()
                .unwrap_or_default(),
        );
        let names = lock(&self.index).pods_of(&ns, &job.name_any());
        names
            .iter()
            .filter_map(|n| self.caches.pod(&ns, n))
            .filter(|p| {
                owned_by(p, &uid)
                    && p.annotations().get(crate::api::keys::TASK_SPEC) == task.as_ref()
            })
            .collect()
    }

    pub(crate) fn remember_created(&self, pod: &Pod) {
        self.inflight().created.insert(pod);
    }

    pub(crate) fn remember_deleted(&self, pod: &Pod) {
        let key = (pod.namespace().unwrap_or_default(), pod.name_any());
        let mut w = self.inflight();
        w.created.settle(&key, None);
        if let Some(u) = &pod.metadata.uid {
            w.deleted.insert(u.clone());
        }
    }

    /// The pod watch saw a pod go: nothing about it is in flight any more.
    pub(crate) fn pod_gone(&self, pod: &Pod) {
        let key = (pod.namespace().unwrap_or_default(), pod.name_any());
        let mut w = self.inflight();
        if let Some(u) = &pod.metadata.uid {
            w.deleted.remove(u);
            w.created.settle(&key, Some(u));
        }
    }

    /// What this controller last wrote into ConfigMap `namespace/name` (`None`: it has not
    /// written it since it started, or the job was deleted since).
    pub(crate) fn config_map_written(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<std::collections::BTreeMap<String, String>> {
        self.inflight()
            .config_maps
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    pub(crate) fn remember_config_map(
        &self,
        namespace: &str,
        name: &str,
        data: std::collections::BTreeMap<String, String>,
    ) {
        self.inflight()
            .config_maps
            .insert((namespace.to_string(), name.to_string()), data);
    }

    /// The version of a job pod the watch showed before `new` (`None`: first sight), and
    /// remembers `new`.
    ///
    /// The watch listing the pod also settles its create: the shared store holds it now, so
    /// the in-flight copy goes (else `pods_of` scans every pod of a burst until each job
    /// happens to sync again).
    ///
    /// `new` is remembered as the shared store's own copy (job pods are kept whole there,
    /// [`crate::cluster::packed::works_on`]) when the store holds this version
    /// (it does for an `Apply`: subscribers run after the store took the event); only during
    /// a relist, which the store applies at its end, is it copied.
    pub(crate) fn last_pod(&self, namespace: &str, name: &str, new: &Pod) -> Option<Arc<Pod>> {
        super::index::job_of(new)?;
        let shared = self
            .caches
            .pod(namespace, name)
            .filter(|p| {
                p.metadata.resource_version.is_some()
                    && p.metadata.resource_version == new.metadata.resource_version
            })
            .unwrap_or_else(|| Arc::new(new.clone()));
        let key = (namespace.to_string(), name.to_string());
        let mut w = self.inflight();
        w.created.settle(&key, new.metadata.uid.as_deref());
        w.last_pods.insert(key, shared)
    }

    /// A job pod is gone from the watch.
    pub(crate) fn forget_last_pod(&self, pod: &Pod) {
        self.inflight()
            .last_pods
            .remove(&(pod.namespace().unwrap_or_default(), pod.name_any()));
    }

    /// Reads the job from the API (after a conflict: the cache may still lag) and keeps it
    /// as the freshest version.
    pub(crate) async fn refresh_job(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(), super::JobError> {
        let api: kube::Api<Job> = kube::Api::namespaced(self.client.clone(), namespace);
        match api.get_opt(name).await {
            Ok(Some(j)) => {
                self.forget_job(namespace, name);
                self.remember_job(&j);
                Ok(())
            }
            Ok(None) => {
                self.forget_job(namespace, name);
                Ok(())
            }
            Err(e) => Err(KubeOp::new("get-job", name, e).into()),
        }
    }

    /// Whether `message` is new for the job's PodGroupPending Event (and remembers it).
    pub(crate) fn pg_pending_is_new(&self, namespace: &str, job: &str, message: &str) -> bool {
        let key = (namespace.to_string(), job.to_string());
        let mut w = self.inflight();
        if w.pg_pending.get(&key).is_some_and(|m| m == message) {
            return false;
        }
        w.pg_pending.insert(key, message.to_string());
        true
    }

    pub(crate) fn forget_config_map(&self, namespace: &str, name: &str) {
        self.inflight()
            .config_maps
            .remove(&(namespace.to_string(), name.to_string()));
    }

    /// Records an Event on the job (failures to record are only logged).
    pub(crate) async fn event(&self, job: &Job, type_: EventType, reason: &str, message: &str) {
        let r = object_ref(
            crate::api::batch::API_VERSION,
            "Job",
            job.metadata.namespace.as_deref(),
            &job.name_any(),
            job.metadata.uid.as_deref(),
        );
        if let Err(e) = self.recorder.record(&r, type_, reason, message).await {
            tracing::debug!(error = %crate::report::report(&e), "could not record Event");
        }
    }
}

/// Whether the pod's controller is the job with `uid`.
pub(crate) fn owned_by(pod: &Pod, uid: &str) -> bool {
    owner_job(pod) == Some(uid)
}

/// The uid of the Job that controls `pod`.
fn owner_job(pod: &Pod) -> Option<&str> {
    pod.owner_references()
        .iter()
        .find(|r| r.controller == Some(true) && r.kind == "Job")
        .map(|r| r.uid.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv32_matches_the_reference_values() {
        // FNV-1 (not 1a) 32-bit test vectors.
        assert_eq!(fnv32(b""), 0x811c_9dc5);
        assert_eq!(fnv32(b"a"), 0x050c_5d7e);
        assert_eq!(fnv32(b"foobar"), 0x31f0_b262);
    }

    #[test]
    fn a_job_always_goes_to_the_same_worker() {
        for key in ["default/a", "ns/job-1", "x/y"] {
            let w = worker_of(key, 5);
            assert!(w < 5);
            assert_eq!(w, worker_of(key, 5));
            assert_eq!(w, fnv32(key.as_bytes()) as usize % 5);
        }
        assert_eq!(worker_of("anything", 0), 0);
    }

    fn created_pod(name: &str, uid: &str, job_uid: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns", "uid": uid, "ownerReferences": [{
                "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j",
                "uid": job_uid, "controller": true}]}
        }))
        .unwrap()
    }

    fn names_of(c: &Created, job_uid: &str) -> Vec<String> {
        let mut v: Vec<String> = c.of_job(job_uid).map(|p| p.name_any()).collect();
        v.sort();
        v
    }

    #[test]
    fn pods_created_and_not_listed_are_found_by_their_job_until_the_watch_settles_them() {
        let mut c = Created::default();
        c.insert(&created_pod("a-0", "u-a0", "job-a"));
        c.insert(&created_pod("a-1", "u-a1", "job-a"));
        c.insert(&created_pod("b-0", "u-b0", "job-b"));
        assert_eq!(names_of(&c, "job-a"), ["a-0", "a-1"]);
        assert_eq!(names_of(&c, "job-b"), ["b-0"]);

        // The watch lists another pod of the same name (an older incarnation): kept.
        let key = ("ns".to_string(), "a-0".to_string());
        c.settle(&key, Some("u-old"));
        assert_eq!(names_of(&c, "job-a"), ["a-0", "a-1"]);
        // It lists this one: settled, and gone from its job's pods.
        c.settle(&key, Some("u-a0"));
        assert_eq!(names_of(&c, "job-a"), ["a-1"]);
        assert!(c.get(&key).is_none());

        // A pod of that name made again for another job moves to that job.
        c.insert(&created_pod("a-1", "u-a1b", "job-b"));
        assert!(names_of(&c, "job-a").is_empty());
        assert_eq!(names_of(&c, "job-b"), ["a-1", "b-0"]);
        c.settle(&("ns".to_string(), "a-1".to_string()), None);
        c.settle(&("ns".to_string(), "b-0".to_string()), None);
        assert!(
            c.pods.is_empty() && c.by_job.is_empty(),
            "nothing is left behind"
        );
    }

    #[test]
    fn resource_versions_compare_as_numbers() {
        assert!(older(Some("9"), Some("10")));
        assert!(!older(Some("10"), Some("10")));
        assert!(!older(Some("abc"), Some("10")));
        assert!(!older(None, Some("10")));
    }
}
