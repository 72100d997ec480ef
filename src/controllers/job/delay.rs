//! (stub until job-a lands)
#![allow(missing_docs, unused_variables)]
use super::request::Request;
use crate::api::batch::{Action, Event};
use tokio_util::sync::CancellationToken;
#[derive(Clone, Debug)]
pub struct DelayedAction {
    pub job_key: String,
    pub task: Option<String>,
    pub pod: String,
    pub pod_uid: Option<String>,
    pub partition: Option<String>,
    pub event: Event,
    pub action: Action,
    pub delay: std::time::Duration,
}
#[derive(Default, Debug)]
pub struct DelayedActions {}
impl DelayedActions {
    pub fn register(&self, a: DelayedAction) -> Option<CancellationToken> {
        todo!()
    }
    pub fn cancel_for(&self, req: &Request) {
        todo!()
    }
    pub fn cleanup_after(&self, job_key: &str, action: &Action, req: &Request) {
        todo!()
    }
    pub fn fired(&self, a: &DelayedAction, token: &CancellationToken) {
        todo!()
    }
    pub fn forget_job(&self, job_key: &str) {
        todo!()
    }
    pub fn len(&self) -> usize {
        todo!()
    }
    pub fn is_empty(&self) -> bool {
        todo!()
    }
}
