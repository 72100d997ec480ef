//! (stub until job-a lands)
#![allow(missing_docs, unused_variables)]
use super::request::Request;
use crate::api::PodGroup;
use crate::api::batch::{Action, Job};
use k8s_openapi::api::core::v1::Pod;
pub struct Decision {
    pub action: Action,
    pub delay: Option<std::time::Duration>,
}
pub fn apply_policies(job: &Job, req: &Request) -> Decision {
    todo!()
}
pub fn task_completed(job: &Job, task: &str, pods: &[&Pod]) -> bool {
    todo!()
}
pub fn task_failed(job: &Job, task: &str, pods: &[&Pod]) -> bool {
    todo!()
}
pub fn pod_added(pod: &Pod) -> Option<Request> {
    todo!()
}
pub fn pod_updated(job: Option<&Job>, old: &Pod, new: &Pod, siblings: &[&Pod]) -> Option<Request> {
    todo!()
}
pub fn pod_deleted(pod: &Pod, was_cached: bool) -> Option<Request> {
    todo!()
}
pub fn job_updated(old: &Job, new: &Job) -> Option<Request> {
    todo!()
}
pub fn pod_group_updated(old: &PodGroup, new: &PodGroup) -> Option<Request> {
    todo!()
}
