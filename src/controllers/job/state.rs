//! (stub until job-a lands)
#![allow(missing_docs, unused_variables)]
use crate::api::batch::{Action, JobPhase, JobSpec, JobStatus};
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retain {
    None,
    Soft,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    Sync,
    KillJob(Retain),
    KillTarget,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    None,
    PendingSync,
    RunningSync,
    ToRestarting,
    ToAborting,
    ToCompleting,
    ToTerminating,
    Restarting,
    Aborting,
    Completing,
    Terminating,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub work: Work,
    pub rule: Rule,
}
pub fn step(phase: Option<&JobPhase>, action: &Action) -> Step {
    todo!()
}
pub fn apply(rule: Rule, spec: &JobSpec, status: &mut JobStatus) -> bool {
    todo!()
}
