//! (stub until job-b lands)
#![allow(missing_docs, unused_variables)]
use crate::api::batch::{Job, TaskSpec, VolumeSpec};
use crate::api::{PodGroup, ResourceList};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
pub fn build_pod(job: &Job, task: &TaskSpec, index: i32, forwarding: bool) -> Pod {
    todo!()
}
pub fn build_pod_group(job: &Job, priority_of: &dyn Fn(&str) -> Option<i32>) -> PodGroup {
    todo!()
}
pub fn pod_group_update(existing: &PodGroup, desired: &PodGroup) -> Option<serde_json::Value> {
    todo!()
}
pub fn min_resources(job: &Job, priority_of: &dyn Fn(&str) -> Option<i32>) -> ResourceList {
    todo!()
}
pub fn generated_claim_name(job: &Job, i: usize) -> String {
    todo!()
}
pub fn build_pvc(job: &Job, volume: &VolumeSpec, claim_name: &str) -> PersistentVolumeClaim {
    todo!()
}
pub fn dependencies_ready(job: &Job, task: &TaskSpec, pod: &dyn Fn(&str) -> Option<Pod>) -> bool {
    todo!()
}
pub fn owner_reference(job: &Job) -> OwnerReference {
    todo!()
}
