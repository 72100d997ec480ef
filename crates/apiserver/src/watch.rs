//! Watch streams in kube-apiserver's wire form: one JSON object per line
//! (`{"type":"ADDED","object":{…}}`), from a resourceVersion (history replay) or from "now"
//! with synthetic ADDED events, filtered by namespace and selectors (an object that stops
//! matching is sent as DELETED, one that starts matching as ADDED), with BOOKMARK events,
//! `sendInitialEvents`, `timeoutSeconds`, the `watch-cut` fault, and a 410 ERROR event when
//! the requested version is gone or the watcher fell too far behind. A watch that asks for
//! Tables (`kubectl get -w`) gets every event's object as a Table of one row
//! ([`super::table_view`]), column definitions in the first event only.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use futures::Stream;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use super::resources::ResourceInfo;
use super::selectors::{FieldSelector, LabelSelector};
use super::store::{Event, EventType, Stored};
use super::table_view::{self, TableOptions};
use super::{ApiError, ApiServer};

/// What a watch asks for.
#[derive(Clone, Debug, Default)]
pub struct WatchQuery {
    /// Start after this version; `None` = current state first (as synthetic ADDED events).
    pub from: Option<u64>,
    /// Namespace (None = all).
    pub namespace: Option<String>,
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
    /// End the stream cleanly after this long.
    pub timeout: Option<Duration>,
    /// Send BOOKMARK events.
    pub bookmarks: bool,
    /// `sendInitialEvents=true`: initial state, then a bookmark marking its end.
    pub send_initial: bool,
    /// Send objects as `meta.k8s.io/v1` Tables (`Accept: ...;as=Table`) with these options.
    pub table: Option<TableOptions>,
}

impl WatchQuery {
    /// Whether an object passes the namespace and selector filters.
    pub fn matches(&self, o: &Stored) -> bool {
        self.namespace.as_ref().is_none_or(|ns| *ns == o.namespace)
            && self.labels.matches(o)
            && self.fields.matches(o)
    }

    /// The event a watcher with this filter sees for a store event, if any.
    pub fn translate(&self, ev: &Event) -> Option<EventType> {
        let now = self.matches(&ev.obj);
        match ev.kind {
            EventType::Added | EventType::Deleted => now.then_some(ev.kind),
            EventType::Modified => {
                let before = ev.prev.as_ref().is_some_and(|p| self.matches(p));
                match (before, now) {
                    (true, true) => Some(EventType::Modified),
                    (false, true) => Some(EventType::Added),
                    (true, false) => Some(EventType::Deleted),
                    (false, false) => None,
                }
            }
        }
    }
}

/// The object's JSON as served at `version` (storage objects are rewritten for other versions
/// of a multi-version custom resource).
pub fn render(res: &ResourceInfo, version: &str, obj: &Stored) -> Bytes {
    if version == res.storage_version() {
        return obj.json.clone();
    }
    match obj.value() {
        Ok(mut v) => {
            v["apiVersion"] = json!(res.api_version(version));
            serde_json::to_vec(&v)
                .map(Bytes::from)
                .unwrap_or_else(|_| obj.json.clone())
        }
        Err(_) => obj.json.clone(),
    }
}

fn event_line(kind: &str, object: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(object.len() + 32);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(object);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

/// A bookmark's object: kind, apiVersion and the version reached; kube-apiserver 1.36 sends no
/// `creationTimestamp` in it.
fn bookmark(res: &ResourceInfo, version: &str, rv: u64, initial_end: bool) -> Value {
    let mut obj = json!({
        "kind": res.kind,
        "apiVersion": res.api_version(version),
        "metadata": {"resourceVersion": rv.to_string()},
    });
    if initial_end {
        obj["metadata"]["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    obj
}

/// How one watch encodes its events' objects: as served, or as Tables. kube-apiserver encodes
/// every object of a Table watch, bookmarks included, as a Table, and every one after the first
/// without column definitions.
struct Encoder {
    res: Arc<ResourceInfo>,
    version: String,
    table: Option<TableOptions>,
}

impl Encoder {
    fn line(&mut self, kind: &str, obj: &Stored) -> Bytes {
        match self.table {
            None => event_line(kind, &render(&self.res, &self.version, obj)),
            Some(_) => match obj.value() {
                Ok(v) => self.value_line(kind, &v),
                Err(e) => error_line(&ApiError::Internal(e.to_string())),
            },
        }
    }

    fn value_line(&mut self, kind: &str, v: &Value) -> Bytes {
        let Some(opts) = self.table.as_mut() else {
            return event_line(kind, v.to_string().as_bytes());
        };
        let t = table_view::object_table(&self.res, &self.version, v, opts);
        opts.no_headers = true;
        event_line(kind, t.to_string().as_bytes())
    }

    fn bookmark(&mut self, rv: u64, initial_end: bool) -> Bytes {
        let b = bookmark(&self.res, &self.version, rv, initial_end);
        self.value_line("BOOKMARK", &b)
    }
}

/// The ERROR event line carrying a `Status`.
pub fn error_line(e: &ApiError) -> Bytes {
    event_line("ERROR", e.status().to_string().as_bytes())
}

/// Starts a watch and returns its body stream. Errors before the stream starts (bad version)
/// are returned as the first and only ERROR event, as kube-apiserver's watch cache does.
pub fn start(
    api: Arc<ApiServer>,
    res: Arc<ResourceInfo>,
    version: String,
    q: WatchQuery,
) -> impl Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static {
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    tokio::spawn(run(api, res, version, q, tx));
    futures::stream::unfold(
        rx,
        |mut rx| async move { rx.recv().await.map(|b| (Ok(b), rx)) },
    )
}

async fn run(
    api: Arc<ApiServer>,
    res: Arc<ResourceInfo>,
    version: String,
    q: WatchQuery,
    tx: mpsc::Sender<Bytes>,
) {
    // A watch that asks for the initial state with a version, or streams, start from "now".
    let from = if q.send_initial { None } else { q.from };
    let start = match api.store.watch(&res.group_resource(), from) {
        Ok(s) => s,
        Err(super::store::StoreError::Expired { requested, oldest }) => {
            let e = ApiError::Expired(format!("too old resource version: {requested} ({oldest})"));
            let _ = tx.send(error_line(&e)).await;
            return;
        }
        Err(e) => {
            let _ = tx
                .send(error_line(&ApiError::Internal(e.to_string())))
                .await;
            return;
        }
    };
    let mut enc = Encoder {
        res: res.clone(),
        version: version.clone(),
        table: q.table,
    };
    let mut last_rv = q
        .from
        .unwrap_or(0)
        .max(if from.is_none() { start.rv } else { 0 });
    for ev in &start.initial {
        if let Some(kind) = q.translate(ev)
            && tx.send(enc.line(kind.as_str(), &ev.obj)).await.is_err()
        {
            return;
        }
        last_rv = last_rv.max(ev.obj.rv);
    }
    if q.send_initial && tx.send(enc.bookmark(last_rv, true)).await.is_err() {
        return;
    }
    let mut rx = start.rx;
    let cut = api.faults.spec().watch_cut;
    let limit = match (q.timeout, cut) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let deadline = tokio::time::sleep(limit.unwrap_or(Duration::from_secs(365 * 24 * 3600)));
    tokio::pin!(deadline);
    let mut tick = tokio::time::interval(api.options.bookmark_interval);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = &mut deadline => return,
            _ = tx.closed() => return,
            _ = tick.tick(), if q.bookmarks => {
                if tx.send(enc.bookmark(last_rv, false)).await.is_err() {
                    return;
                }
            }
            r = rx.recv() => match r {
                Ok(ev) => {
                    if ev.obj.rv <= last_rv {
                        continue;
                    }
                    last_rv = ev.obj.rv;
                    if let Some(kind) = q.translate(&ev)
                        && tx.send(enc.line(kind.as_str(), &ev.obj)).await.is_err()
                    {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    let e = ApiError::Expired(format!(
                        "too old resource version: {last_rv} (watcher fell {n} events behind)"
                    ));
                    let _ = tx.send(error_line(&e)).await;
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }
}

/// Parses an event line (for tests and the stand-ins).
pub fn parse_line(line: &[u8]) -> Option<(String, Value)> {
    let v: Value = serde_json::from_slice(line).ok()?;
    Some((
        v.get("type")?.as_str()?.to_string(),
        v.get("object")?.clone(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(labels: Value, rv: u64) -> Arc<Stored> {
        Arc::new(
            Stored::from_value(
                &json!({"metadata": {"name": "p", "namespace": "a", "labels": labels}}),
                rv,
            )
            .unwrap(),
        )
    }

    #[test]
    fn filtered_watchers_see_objects_enter_and_leave() {
        let q = WatchQuery {
            labels: LabelSelector::parse("app=web").unwrap(),
            ..Default::default()
        };
        let web = stored(json!({"app": "web"}), 2);
        let db = stored(json!({"app": "db"}), 3);
        let ev = |obj: &Arc<Stored>, prev: Option<&Arc<Stored>>| Event {
            kind: if prev.is_some() {
                EventType::Modified
            } else {
                EventType::Added
            },
            obj: obj.clone(),
            prev: prev.cloned(),
        };
        assert_eq!(q.translate(&ev(&web, None)), Some(EventType::Added));
        assert_eq!(q.translate(&ev(&db, None)), None);
        assert_eq!(q.translate(&ev(&db, Some(&web))), Some(EventType::Deleted));
        assert_eq!(q.translate(&ev(&web, Some(&db))), Some(EventType::Added));
        assert_eq!(
            q.translate(&ev(&web, Some(&web))),
            Some(EventType::Modified)
        );
        let other_ns = WatchQuery {
            namespace: Some("b".into()),
            ..Default::default()
        };
        assert_eq!(other_ns.translate(&ev(&web, None)), None);
    }

    #[test]
    fn lines_are_kube_apiserver_watch_events() {
        let line = event_line("ADDED", br#"{"a":1}"#);
        assert_eq!(&line[..], b"{\"type\":\"ADDED\",\"object\":{\"a\":1}}\n");
        let (t, o) = parse_line(&error_line(&ApiError::Expired("too old".into()))).unwrap();
        assert_eq!(t, "ERROR");
        assert_eq!(o["code"], 410);
    }
}
