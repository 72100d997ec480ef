//! The LIST and DELETE-collection verbs: list options checked as kube-apiserver checks them,
//! `resourceVersion` / `resourceVersionMatch` semantics, and continue tokens that pin the
//! list's version so every page comes from the same state.
//!
//! | resourceVersion | resourceVersionMatch     | answer                                          |
//! |-----------------|--------------------------|-------------------------------------------------|
//! | unset           | unset                    | the latest state                                |
//! | `0`             | unset / NotOlderThan     | any state: the latest                           |
//! | N               | unset / NotOlderThan     | the latest, once the store has reached N        |
//! | N               | Exact                    | the state at N (410 once N left the history)    |
//!
//! A version the store has not reached gets, after waiting up to [`FRESHNESS_WAIT`] for it
//! (kube-apiserver's watch cache waits 3 s), `504 Timeout` "Too large resource version" with a
//! `ResourceVersionTooLarge` cause. The store's per-resource event history is its compaction
//! window: a continue token or an Exact version older than it gets `410 Expired`, an expired
//! continue token with a token in `metadata.continue` that continues at the latest state.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::ops::{DeleteOptions, ObjectRef};
use super::resources::ResourceInfo;
use super::selectors::{FieldSelector, LabelSelector};
use super::store::{StoreError, Stored};
use super::{ApiError, ApiServer, Caller};

/// How long a LIST waits for the store to reach a version it asked for.
pub const FRESHNESS_WAIT: Duration = Duration::from_secs(3);

/// `resourceVersionMatch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionMatch {
    /// `NotOlderThan`: at least this version.
    NotOlderThan,
    /// `Exact`: exactly this version.
    Exact,
}

/// The query of a LIST or DELETE-collection, as the client sent it.
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `limit` (0: all).
    pub limit: usize,
    /// `continue` (empty: first page).
    pub continue_token: String,
    /// `resourceVersion` (empty: unset).
    pub resource_version: String,
    /// `resourceVersionMatch` as sent (empty: unset).
    pub version_match: String,
}

/// One page of a list.
#[derive(Clone, Debug)]
pub struct ListResult {
    /// The objects, in key order.
    pub items: Vec<Arc<Stored>>,
    /// The version the page shows.
    pub resource_version: u64,
    /// The token for the next page, when more remain.
    pub continue_token: Option<String>,
    /// How many more items match after this page (with a continue token).
    pub remaining: usize,
}

/// Where a list reads: the latest state (once the store has reached a version), or exactly
/// one version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReadAt {
    Latest { not_older_than: u64 },
    Exact(u64),
}

/// A decoded continue token: the version the list started at (`None`: continue at the latest,
/// as the token of an expired list does) and the key of the last item returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContinueToken {
    /// The list's version.
    pub resource_version: Option<u64>,
    /// Namespace and name of the last item returned.
    pub after: (String, String),
}

impl ContinueToken {
    /// Hex of `[rv, namespace, name]` (rv -1 for "latest"): URL-safe and opaque to clients.
    pub fn encode(&self) -> String {
        let rv = self.resource_version.map_or(-1, |v| v as i128);
        let raw = json!([rv, self.after.0, self.after.1]).to_string();
        raw.bytes().map(|b| format!("{b:02x}")).collect()
    }

    /// Reads a token from [`ContinueToken::encode`] (400 otherwise, as kube-apiserver answers).
    pub fn decode(token: &str) -> Result<Self, ApiError> {
        let bad = || ApiError::BadRequest("continue key is not valid".into());
        if !token.len().is_multiple_of(2) {
            return Err(bad());
        }
        let bytes: Vec<u8> = (0..token.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(token.get(i..i + 2).unwrap_or("zz"), 16))
            .collect::<Result<_, _>>()
            .map_err(|_| bad())?;
        let (rv, ns, name): (i64, String, String) =
            serde_json::from_slice(&bytes).map_err(|_| bad())?;
        let resource_version = match rv {
            -1 => None,
            v => Some(u64::try_from(v).map_err(|_| bad())?),
        };
        Ok(Self {
            resource_version,
            after: (ns, name),
        })
    }
}

/// kube-apiserver's `ValidateListOptions`: 422 on `ListOptions.meta.k8s.io`.
fn validate(o: &ListOptions) -> Result<(), ApiError> {
    let mut errs = Vec::new();
    if !o.version_match.is_empty() {
        if o.resource_version.is_empty() {
            errs.push("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided".to_string());
        }
        if !o.continue_token.is_empty() {
            errs.push("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided".to_string());
        }
        if o.version_match != "Exact" && o.version_match != "NotOlderThan" {
            errs.push(format!(
                "resourceVersionMatch: Unsupported value: \"{}\": supported values: \"Exact\", \"NotOlderThan\", \"\"",
                o.version_match
            ));
        }
        if o.version_match == "Exact" && o.resource_version == "0" {
            errs.push("resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"".to_string());
        }
    }
    match errs.len() {
        0 => Ok(()),
        1 => Err(ApiError::Invalid(format!(
            "ListOptions.meta.k8s.io \"\" is invalid: {}",
            errs[0]
        ))),
        _ => Err(ApiError::Invalid(format!(
            "ListOptions.meta.k8s.io \"\" is invalid: [{}]",
            errs.join(", ")
        ))),
    }
}

/// Where the list reads, from validated options (pure).
fn read_at(o: &ListOptions) -> Result<ReadAt, ApiError> {
    if o.resource_version.is_empty() {
        return Ok(ReadAt::Latest { not_older_than: 0 });
    }
    let rv: u64 = o.resource_version.parse().map_err(|_| {
        ApiError::BadRequest(format!(
            "invalid resource version: {:?}",
            o.resource_version
        ))
    })?;
    Ok(match o.version_match.as_str() {
        "Exact" => ReadAt::Exact(rv),
        _ => ReadAt::Latest { not_older_than: rv },
    })
}

impl ApiServer {
    /// Waits up to [`FRESHNESS_WAIT`] for the store to reach `rv`; 504 "Too large resource
    /// version" otherwise.
    async fn wait_for_version(&self, rv: u64) -> Result<(), ApiError> {
        let deadline = tokio::time::Instant::now() + FRESHNESS_WAIT;
        loop {
            let current = self.store.current_rv();
            if current >= rv {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ApiError::TooLargeResourceVersion {
                    requested: rv,
                    current,
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// LIST: one page of the objects of `res` (in `namespace`, or all) that match the
    /// selectors, read where the options say (see the module docs).
    pub async fn list(
        &self,
        res: &ResourceInfo,
        namespace: Option<&str>,
        o: &ListOptions,
    ) -> Result<ListResult, ApiError> {
        validate(o)?;
        let gr = res.group_resource();
        let keep = |s: &Stored| o.labels.matches(s) && o.fields.matches(s);
        let page = if o.continue_token.is_empty() {
            match read_at(o)? {
                ReadAt::Latest { not_older_than } => {
                    self.wait_for_version(not_older_than).await?;
                    self.store.list(&gr, namespace, None, o.limit, keep)
                }
                ReadAt::Exact(rv) => {
                    self.wait_for_version(rv).await?;
                    self.store
                        .list_at(&gr, namespace, None, o.limit, rv, keep)
                        .map_err(|e| match e {
                            StoreError::Expired { .. } => ApiError::Expired(
                                "The resourceVersion for the provided list is too old.".into(),
                            ),
                            other => ApiError::Internal(other.to_string()),
                        })?
                }
            }
        } else {
            if !o.resource_version.is_empty() && o.resource_version != "0" {
                return Err(ApiError::BadRequest(
                    "specifying resource version is not allowed when using continue".into(),
                ));
            }
            let token = ContinueToken::decode(&o.continue_token)?;
            let after = Some(&token.after);
            match token.resource_version {
                None => self.store.list(&gr, namespace, after, o.limit, keep),
                Some(rv) => self
                    .store
                    .list_at(&gr, namespace, after, o.limit, rv, keep)
                    .map_err(|e| match e {
                        StoreError::Expired { .. } => ApiError::ContinueExpired {
                            token: ContinueToken {
                                resource_version: None,
                                after: token.after.clone(),
                            }
                            .encode(),
                        },
                        other => ApiError::Internal(other.to_string()),
                    })?,
            }
        };
        // A list continued at the latest state keeps continuing at the latest state.
        let pinned = o.continue_token.is_empty()
            || ContinueToken::decode(&o.continue_token).is_ok_and(|t| t.resource_version.is_some());
        let continue_token = page.next.map(|after| {
            ContinueToken {
                resource_version: pinned.then_some(page.rv),
                after,
            }
            .encode()
        });
        Ok(ListResult {
            items: page.items,
            resource_version: page.rv,
            continue_token,
            remaining: page.remaining,
        })
    }

    /// DELETE on a collection: deletes every object the list options select, each through the
    /// DELETE verb (admission, finalizers, propagation). Returns the deleted objects' last
    /// states.
    pub async fn delete_collection(
        &self,
        caller: Caller,
        res: &ResourceInfo,
        namespace: Option<&str>,
        list: &ListOptions,
        opts: &DeleteOptions,
    ) -> Result<ListResult, ApiError> {
        let page = self.list(res, namespace, list).await?;
        let mut deleted = Vec::new();
        for o in &page.items {
            match self
                .delete(ObjectRef::new(caller, res, &o.namespace, &o.name), opts)
                .await
            {
                Ok(d) => deleted.push(d.object),
                Err(ApiError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(ListResult {
            items: deleted,
            resource_version: self.store.current_rv(),
            continue_token: None,
            remaining: 0,
        })
    }
}

/// The `metadata` of a list answer.
pub fn list_meta(r: &ListResult) -> Value {
    let mut meta = json!({"resourceVersion": r.resource_version.to_string()});
    if let Some(c) = &r.continue_token {
        meta["continue"] = json!(c);
        meta["remainingItemCount"] = json!(r.remaining);
    }
    meta
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EmbeddedOptions;
    use crate::ops::WriteOptions;

    fn server(history: usize) -> Arc<ApiServer> {
        ApiServer::new(EmbeddedOptions {
            nodes: 0,
            sim_kubelet: false,
            sim_controllers: false,
            watch_history: history,
            ..Default::default()
        })
    }

    async fn put(api: &ApiServer, name: &str, value: &str) {
        let res = api.resource("", "v1", "configmaps").unwrap();
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": value}});
        let target = ObjectRef::new(Caller::Client, &res, "default", name);
        if api.get_object(&res, "default", name).is_ok() {
            let body = serde_json::to_vec(&json!({"data": {"v": value}})).unwrap();
            api.patch(
                target,
                crate::patching::PatchKind::Merge,
                &body,
                &WriteOptions::default(),
            )
            .await
            .unwrap();
        } else {
            api.create(
                Caller::Client,
                &res,
                "default",
                obj,
                &WriteOptions::default(),
            )
            .await
            .unwrap();
        }
    }

    fn names(r: &ListResult) -> Vec<(String, String)> {
        r.items
            .iter()
            .map(|s| {
                let v = s.value().unwrap();
                (
                    s.name.clone(),
                    v["data"]["v"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    }

    fn opts(f: impl FnOnce(&mut ListOptions)) -> ListOptions {
        let mut o = ListOptions::default();
        f(&mut o);
        o
    }

    #[test]
    fn continue_tokens_round_trip_and_reject_garbage() {
        let t = ContinueToken {
            resource_version: Some(42),
            after: ("ns".into(), "pod-1".into()),
        };
        assert_eq!(ContinueToken::decode(&t.encode()).unwrap(), t);
        let latest = ContinueToken {
            resource_version: None,
            ..t
        };
        assert_eq!(ContinueToken::decode(&latest.encode()).unwrap(), latest);
        for bad in ["zz", "abc", "5b5d"] {
            assert_eq!(ContinueToken::decode(bad).unwrap_err().code(), 400, "{bad}");
        }
    }

    #[test]
    fn list_options_are_checked_like_kube_apiserver() {
        let e = validate(&opts(|o| o.version_match = "Exact".into())).unwrap_err();
        assert_eq!(e.code(), 422);
        assert_eq!(
            e.to_string(),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
        );
        let e = validate(&opts(|o| {
            o.version_match = "Exact".into();
            o.resource_version = "0".into();
        }))
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"")
        );
        let e = validate(&opts(|o| {
            o.version_match = "Newest".into();
            o.resource_version = "5".into();
        }))
        .unwrap_err();
        assert!(e.to_string().contains("Unsupported value: \"Newest\""));
        assert_eq!(
            read_at(&opts(|o| o.resource_version = "7".into())).unwrap(),
            ReadAt::Latest { not_older_than: 7 }
        );
        assert_eq!(
            read_at(&opts(|o| {
                o.resource_version = "7".into();
                o.version_match = "Exact".into();
            }))
            .unwrap(),
            ReadAt::Exact(7)
        );
        assert_eq!(
            read_at(&opts(|o| o.resource_version = "x".into()))
                .unwrap_err()
                .code(),
            400
        );
    }

    #[tokio::test]
    async fn pages_come_from_the_first_pages_version() {
        let api = server(1000);
        let res = api.resource("", "v1", "configmaps").unwrap();
        for n in ["a", "b", "c"] {
            put(&api, n, "1").await;
        }
        let first = api
            .list(&res, Some("default"), &opts(|o| o.limit = 1))
            .await
            .unwrap();
        assert_eq!(names(&first), [("a".into(), "1".into())]);
        assert_eq!(first.remaining, 2);
        // Writes after the first page: a change, a deletion and a new object.
        put(&api, "b", "2").await;
        api.delete(
            ObjectRef::new(Caller::Client, &res, "default", "c"),
            &DeleteOptions::default(),
        )
        .await
        .unwrap();
        put(&api, "bb", "1").await;
        let rest = api
            .list(
                &res,
                Some("default"),
                &opts(|o| o.continue_token = first.continue_token.clone().unwrap()),
            )
            .await
            .unwrap();
        assert_eq!(
            names(&rest),
            [("b".into(), "1".into()), ("c".into(), "1".into())],
            "the rest of the list as it was"
        );
        assert_eq!(rest.resource_version, first.resource_version);
        let now = api
            .list(&res, Some("default"), &ListOptions::default())
            .await
            .unwrap();
        assert_eq!(
            names(&now),
            [
                ("a".into(), "1".into()),
                ("b".into(), "2".into()),
                ("bb".into(), "1".into())
            ]
        );
    }

    #[tokio::test]
    async fn exact_reads_an_older_version_and_too_new_ones_time_out() {
        let api = server(1000);
        let res = api.resource("", "v1", "configmaps").unwrap();
        put(&api, "a", "1").await;
        let then = api.resource_version();
        put(&api, "a", "2").await;
        let exact = api
            .list(
                &res,
                None,
                &opts(|o| {
                    o.resource_version = then.to_string();
                    o.version_match = "Exact".into();
                }),
            )
            .await
            .unwrap();
        assert_eq!(names(&exact), [("a".into(), "1".into())]);
        assert_eq!(exact.resource_version, then);
        let not_older = api
            .list(&res, None, &opts(|o| o.resource_version = then.to_string()))
            .await
            .unwrap();
        assert_eq!(names(&not_older), [("a".into(), "2".into())]);
        let future = api.resource_version() + 100;
        let e = api
            .list(
                &res,
                None,
                &opts(|o| o.resource_version = future.to_string()),
            )
            .await
            .unwrap_err();
        assert_eq!(e.code(), 504);
        assert_eq!(
            e.to_string(),
            format!(
                "Timeout: Too large resource version: {future}, current: {}",
                api.resource_version()
            )
        );
        assert_eq!(
            e.status()["details"]["causes"][0]["reason"],
            "ResourceVersionTooLarge"
        );
    }

    #[tokio::test]
    async fn continue_tokens_and_exact_versions_expire_with_the_history() {
        // The store keeps at least 16 events per resource.
        let api = server(16);
        let res = api.resource("", "v1", "configmaps").unwrap();
        for i in 0..5 {
            put(&api, &format!("c{i}"), "1").await;
        }
        let then = api.resource_version();
        let first = api
            .list(&res, Some("default"), &opts(|o| o.limit = 2))
            .await
            .unwrap();
        for round in 0..20 {
            put(&api, "c0", &round.to_string()).await;
        }
        let e = api
            .list(
                &res,
                Some("default"),
                &opts(|o| o.continue_token = first.continue_token.clone().unwrap()),
            )
            .await
            .unwrap_err();
        assert_eq!((e.code(), e.reason()), (410, "Expired"));
        assert!(
            e.to_string()
                .starts_with("The provided continue parameter is too old")
        );
        let ApiError::ContinueExpired { token } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(e.status()["metadata"]["continue"], json!(token));
        // The token in the answer continues at the latest state.
        let rest = api
            .list(
                &res,
                Some("default"),
                &opts(|o| o.continue_token = token.clone()),
            )
            .await
            .unwrap();
        assert_eq!(rest.items.len(), 3);
        let e = api
            .list(
                &res,
                None,
                &opts(|o| {
                    o.resource_version = then.to_string();
                    o.version_match = "Exact".into();
                }),
            )
            .await
            .unwrap_err();
        assert_eq!(e.code(), 410);
        assert_eq!(
            e.to_string(),
            "The resourceVersion for the provided list is too old."
        );
    }

    #[tokio::test]
    async fn delete_collection_goes_through_delete_and_honours_selectors() {
        let api = server(1000);
        let res = api.resource("", "v1", "configmaps").unwrap();
        for n in ["x1", "x2", "y1"] {
            put(&api, n, "1").await;
        }
        let by_name = opts(|o| o.fields = FieldSelector::parse("metadata.name!=y1").unwrap());
        let gone = api
            .delete_collection(
                Caller::Client,
                &res,
                Some("default"),
                &by_name,
                &DeleteOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(gone.items.len(), 2);
        let left = api
            .list(&res, Some("default"), &ListOptions::default())
            .await
            .unwrap();
        assert_eq!(names(&left), [("y1".into(), "1".into())]);
    }
}
