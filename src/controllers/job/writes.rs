//! The API writes of the Job controller, each counted in `tephra_job_writes_total`: status,
//! job spec, pods, PodGroups, PVCs and plugin resources. Decisions are made elsewhere.

use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::JobError;
use super::build;
use super::context::Context;
use super::plugins::{Owned, OwnedKind, Removed};
use crate::api::batch::JobStatus;
use crate::api::{Job, PodGroup, keys};
use crate::cluster::events::EventType;
use crate::cluster::status_code;
use crate::controllers::KubeOp;

fn kube(op: &'static str, name: &str, e: kube::Error) -> JobError {
    if status_code(&e) == Some(409) && op != "create-pod" {
        return JobError::Conflict(name.to_string());
    }
    KubeOp::new(op, name, e).into()
}

impl Context {
    fn count(&self, op: &str) {
        self.metrics.writes.with_label_values(&[op]).inc();
    }

    /// Writes the job's status (pinned to the resourceVersion it was decided on). A job that
    /// is gone is no error; a conflict is.
    pub(crate) async fn write_status(&self, job: &Job, status: JobStatus) -> Result<Job, JobError> {
        let ns = job.namespace().unwrap_or_default();
        let mut obj = job.clone();
        obj.status = Some(status);
        self.count("status");
        match Api::<Job>::namespaced(self.client.clone(), &ns)
            .replace_status(&job.name_any(), &PostParams::default(), &obj)
            .await
        {
            Ok(written) => {
                self.remember_job(&written);
                if let Some((warning, reason, message)) = super::status::phase_change_event(
                    job.status.as_ref(),
                    written.status.as_ref().unwrap_or(&JobStatus::default()),
                ) {
                    let t = if warning {
                        EventType::Warning
                    } else {
                        EventType::Normal
                    };
                    self.event(&written, t, &reason, &message).await;
                }
                Ok(written)
            }
            Err(e) if status_code(&e) == Some(404) => Ok(obj),
            Err(e) => Err(kube("write-status", &job.name_any(), e)),
        }
    }

    /// Replaces the job (its spec changed: generated claim names, forwarding annotation).
    pub(crate) async fn write_job(&self, job: &Job) -> Result<Job, JobError> {
        let ns = job.namespace().unwrap_or_default();
        self.count("job");
        let written = Api::<Job>::namespaced(self.client.clone(), &ns)
            .replace(&job.name_any(), &PostParams::default(), job)
            .await
            .map_err(|e| kube("update-job", &job.name_any(), e))?;
        self.remember_job(&written);
        Ok(written)
    }

    /// Creates a pod; an existing one of that name counts as created.
    pub(crate) async fn create_pod(&self, pod: &Pod) -> Result<Option<Pod>, JobError> {
        let ns = pod.namespace().unwrap_or_default();
        self.count("create-pod");
        match Api::<Pod>::namespaced(self.client.clone(), &ns)
            .create(&PostParams::default(), pod)
            .await
        {
            Ok(p) => {
                self.remember_created(&p);
                Ok(Some(p))
            }
            Err(e) if status_code(&e) == Some(409) => Ok(None),
            Err(e) => Err(kube("create-pod", &pod.name_any(), e)),
        }
    }

    /// Marks a pod out of sync (so its deletion reads as the controller's, not an eviction),
    /// as Volcano does before a kill.
    pub(crate) async fn mark_pod(&self, pod: &Pod) -> Result<(), JobError> {
        let ns = pod.namespace().unwrap_or_default();
        let path = format!(
            "/metadata/annotations/{}",
            keys::CONTROLLER_OUT_OF_SYNC
                .replace('~', "~0")
                .replace('/', "~1")
        );
        let mut ops = Vec::new();
        if pod.metadata.annotations.is_none() {
            ops.push(json!({"op": "add", "path": "/metadata/annotations", "value": {}}));
        }
        ops.push(json!({"op": "add", "path": path, "value": "true"}));
        let patch: json_patch::Patch = serde_json::from_value(json!(ops))
            .map_err(|e| JobError::Internal(format!("building the out-of-sync patch: {e}")))?;
        self.count("mark-pod");
        match Api::<Pod>::namespaced(self.client.clone(), &ns)
            .patch(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Json::<()>(patch),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if status_code(&e) == Some(404) => Ok(()),
            Err(e) => Err(KubeOp::new("mark-pod", pod.name_any(), e).into()),
        }
    }

    /// Deletes a pod (NotFound is success).
    pub(crate) async fn delete_pod(&self, pod: &Pod) -> Result<(), JobError> {
        let ns = pod.namespace().unwrap_or_default();
        self.count("delete-pod");
        let dp = DeleteParams {
            preconditions: pod
                .metadata
                .uid
                .clone()
                .map(|uid| kube::api::Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
            ..DeleteParams::default()
        };
        match Api::<Pod>::namespaced(self.client.clone(), &ns)
            .delete(&pod.name_any(), &dp)
            .await
        {
            Ok(_) => {
                self.remember_deleted(pod);
                Ok(())
            }
            // Gone, or already replaced by a pod of the same name (uid precondition).
            Err(e) if matches!(status_code(&e), Some(404 | 409)) => Ok(()),
            Err(e) => Err(KubeOp::new("delete-pod", pod.name_any(), e).into()),
        }
    }

    /// Creates the job's PodGroup, or brings the existing one's spec up to date.
    pub(crate) async fn ensure_podgroup(&self, job: &Job) -> Result<(), JobError> {
        let ns = job.namespace().unwrap_or_default();
        let desired = build::build_pod_group(job, &|pc| self.priority(pc));
        let name = desired.name_any();
        let api: Api<PodGroup> = Api::namespaced(self.client.clone(), &ns);
        let existing = self.podgroup(&ns, &name).or_else(|| {
            // Volcano's legacy name: the job's own, when the job owns it.
            self.podgroup(&ns, &job.name_any()).filter(|pg| {
                pg.owner_references()
                    .iter()
                    .any(|r| Some(&r.uid) == job.metadata.uid.as_ref())
            })
        });
        match existing {
            None => {
                self.count("create-podgroup");
                match api.create(&PostParams::default(), &desired).await {
                    Ok(pg) => self.remember_podgroup(&pg),
                    Err(e) if status_code(&e) == Some(409) => {}
                    Err(e) => {
                        return Err(JobError::PodGroup(name, e));
                    }
                }
            }
            Some(pg) => {
                if let Some(patch) = build::pod_group_update(&pg, &desired) {
                    self.count("update-podgroup");
                    let written = api
                        .patch(
                            &pg.name_any(),
                            &PatchParams::default(),
                            &Patch::Merge(&patch),
                        )
                        .await
                        .map_err(|e| JobError::PodGroup(pg.name_any(), e))?;
                    self.remember_podgroup(&written);
                }
            }
        }
        Ok(())
    }

    /// Deletes the job's PodGroup (both names).
    pub(crate) async fn delete_podgroups(
        &self,
        ns: &str,
        job: &str,
        uid: &str,
    ) -> Result<(), JobError> {
        let api: Api<PodGroup> = Api::namespaced(self.client.clone(), ns);
        for name in [format!("{job}-{uid}"), job.to_string()] {
            if self.podgroup(ns, &name).is_none() {
                continue;
            }
            self.count("delete-podgroup");
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if status_code(&e) == Some(404) => {}
                Err(e) => return Err(JobError::PodGroup(name, e)),
            }
            self.forget_podgroup(ns, &name);
        }
        Ok(())
    }

    /// Makes a plugin's object exist: created when missing; a ConfigMap whose data differ is
    /// replaced; other kinds are left as they are (a generated ssh key is never replaced).
    pub(crate) async fn apply_owned(&self, ns: &str, owned: Owned) -> Result<(), JobError> {
        let pp = PostParams::default();
        let c = self.client.clone();
        let result = match owned {
            Owned::ConfigMap(cm) => {
                let name = cm.name_any();
                let data = cm.data.clone().unwrap_or_default();
                let written = self.config_map_written(ns, &name);
                if written.as_ref() == Some(&data) {
                    return Ok(());
                }
                let api: Api<ConfigMap> = Api::namespaced(c, ns);
                self.count("configmap");
                // Written before, so it exists: one unconditional update (no resourceVersion,
                // which ConfigMaps allow) instead of a create refused with 409, a read and an
                // update. A scaled job's hosts are rewritten before its new pods are made, and
                // Volcano's scaling specs read the map about 100 ms after the change.
                let first = if written.is_some() {
                    match api.replace(&name, &pp, &cm).await {
                        Err(e) if status_code(&e) == Some(404) => api.create(&pp, &cm).await,
                        r => r,
                    }
                } else {
                    api.create(&pp, &cm).await
                };
                let r = match first {
                    Err(e) if status_code(&e) == Some(409) => match api.get(&name).await {
                        Ok(mut cur) if cur.data.as_ref() != Some(&data) => {
                            cur.data = Some(data.clone());
                            self.count("configmap");
                            api.replace(&name, &pp, &cur).await.map(|_| ())
                        }
                        Ok(_) => Ok(()),
                        Err(e) => Err(e),
                    },
                    r => r.map(|_| ()),
                };
                if r.is_ok() {
                    self.remember_config_map(ns, &name, data);
                }
                r.map_err(|e| (name, e))
            }
            Owned::Service(s) => create_kept(self, Api::<Service>::namespaced(c, ns), &s).await,
            Owned::NetworkPolicy(n) => {
                create_kept(self, Api::<NetworkPolicy>::namespaced(c, ns), &n).await
            }
            Owned::Secret(s) => create_kept(self, Api::<Secret>::namespaced(c, ns), &s).await,
        };
        result.map_err(|(name, source)| KubeOp::new("plugin-resource", name, source).into())
    }

    /// Deletes a plugin's object (NotFound is success).
    pub(crate) async fn delete_owned(&self, r: &Removed) -> Result<(), JobError> {
        let c = self.client.clone();
        let ns = r.namespace.as_str();
        self.count("delete-plugin-resource");
        let res = match r.kind {
            OwnedKind::ConfigMap => {
                self.forget_config_map(ns, &r.name);
                delete_if_present(Api::<ConfigMap>::namespaced(c, ns), &r.name).await
            }
            OwnedKind::Service => {
                delete_if_present(Api::<Service>::namespaced(c, ns), &r.name).await
            }
            OwnedKind::NetworkPolicy => {
                delete_if_present(Api::<NetworkPolicy>::namespaced(c, ns), &r.name).await
            }
            OwnedKind::Secret => delete_if_present(Api::<Secret>::namespaced(c, ns), &r.name).await,
        };
        res.map_err(|e| KubeOp::new("delete-plugin-resource", r.name.clone(), e).into())
    }

    /// Whether a PVC exists (a GET: PVCs are not watched, and this runs only while a job with
    /// named volumes is Pending).
    pub(crate) async fn pvc_exists(&self, ns: &str, name: &str) -> Result<bool, JobError> {
        match Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), ns)
            .get_opt(name)
            .await
        {
            Ok(p) => Ok(p.is_some()),
            Err(e) => Err(KubeOp::new("get-pvc", name, e).into()),
        }
    }

    /// Creates a PVC (AlreadyExists is success).
    pub(crate) async fn create_pvc(&self, pvc: &PersistentVolumeClaim) -> Result<(), JobError> {
        let ns = pvc.namespace().unwrap_or_default();
        self.count("create-pvc");
        match Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), &ns)
            .create(&PostParams::default(), pvc)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if status_code(&e) == Some(409) => Ok(()),
            Err(e) => Err(KubeOp::new("create-pvc", pvc.name_any(), e).into()),
        }
    }

    /// Deletes a finished job whose TTL ran out (foreground, only this incarnation).
    pub(crate) async fn delete_job(&self, job: &Job) -> Result<(), JobError> {
        let ns = job.namespace().unwrap_or_default();
        let dp = DeleteParams {
            propagation_policy: Some(kube::api::PropagationPolicy::Foreground),
            preconditions: job
                .metadata
                .uid
                .clone()
                .map(|uid| kube::api::Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
            ..DeleteParams::default()
        };
        self.count("delete-job");
        match Api::<Job>::namespaced(self.client.clone(), &ns)
            .delete(&job.name_any(), &dp)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if matches!(status_code(&e), Some(404 | 409)) => Ok(()),
            Err(e) => Err(KubeOp::new("delete-job", job.name_any(), e).into()),
        }
    }
}

/// Deletes an object; one already gone is no error.
async fn delete_if_present<K>(api: Api<K>, name: &str) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(e) if status_code(&e) == Some(404) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates an object that is kept as it is when it exists.
async fn create_kept<K>(ctx: &Context, api: Api<K>, obj: &K) -> Result<(), (String, kube::Error)>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    ctx.count("plugin-resource");
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => Ok(()),
        Err(e) if status_code(&e) == Some(409) => Ok(()),
        Err(e) => Err((obj.name_any(), e)),
    }
}
