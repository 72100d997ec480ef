//! (stub until job-c lands)
#![allow(missing_docs, unused_variables)]
use crate::api::batch::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
pub enum Owned {
    ConfigMap(ConfigMap),
    Service(Service),
    NetworkPolicy(NetworkPolicy),
    Secret(Secret),
}
pub struct Removed {
    pub kind: OwnedKind,
    pub namespace: String,
    pub name: String,
}
pub enum OwnedKind {
    ConfigMap,
    Service,
    NetworkPolicy,
    Secret,
}
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("unknown plugin {0}")]
    Unknown(String),
}
pub trait JobPlugin: Send + Sync {
    fn name(&self) -> &'static str;
    fn on_pod_create(&self, job: &Job, pod: &mut Pod) -> Result<(), PluginError>;
    fn on_job_add(&self, job: &Job) -> Result<Vec<Owned>, PluginError>;
    fn on_job_update(&self, job: &Job) -> Result<Vec<Owned>, PluginError>;
    fn on_job_delete(&self, job: &Job) -> Vec<Removed>;
}
pub fn plugins_for(job: &Job) -> Result<Vec<Box<dyn JobPlugin>>, PluginError> {
    todo!()
}
pub fn controlled_key(name: &str) -> String {
    todo!()
}
