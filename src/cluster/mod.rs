//! The cluster side of tephra: which API server to talk to, the kube client, start-up work
//! (built-in queues) and the one shared set of watch caches every subsystem reads.

pub mod bootstrap;
pub mod caches;
pub mod config;
pub mod events;
pub mod webhooks;

pub use bootstrap::{BootstrapError, ensure_default_queues};
pub use caches::{CacheError, CacheFeeds, Caches};
pub use config::{ClusterError, ClusterSource, Environment};
