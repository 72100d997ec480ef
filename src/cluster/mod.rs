//! The cluster side of tephra: which API server to talk to, the kube client, and (as the
//! controllers land) the one shared set of watch caches every subsystem reads.

pub mod config;

pub use config::{ClusterError, ClusterSource, Environment};
