//! The cluster side of tephra: which API server to talk to, the kube client, start-up work
//! (built-in queues, retried while the API is flaky or not ready) and the one shared set of
//! watch caches every subsystem reads.

pub mod bootstrap;
pub mod caches;
pub mod config;
pub mod events;
pub mod index;
pub mod packed;
pub mod startup;
pub mod trim;
pub mod webhooks;

pub use bootstrap::ensure_default_queues;
pub use caches::{CacheError, CacheFeeds, Caches};
pub use config::{ClusterError, ClusterSource, Environment};
pub use index::{Index, Relist, Staged};

/// The HTTP status the API server answered with; `None` when the request got no answer
/// (connection, TLS, timeouts, a body that did not decode).
pub fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}
