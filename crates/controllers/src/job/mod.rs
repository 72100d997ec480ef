//! The vcJob's decisions: which action a request calls for ([`policy`]), what that action does
//! in the job's phase ([`state`]), the objects a job is made of ([`build`], [`plugins`]) and
//! its status ([`status`]), and the pod diff of a sync ([`sync`]).

pub mod build;
pub mod plugins;
pub mod policy;
pub mod request;
pub mod state;
pub mod status;
pub mod sync;
