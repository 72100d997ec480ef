//! `/queues/mutate` (CREATE) and `/queues/validate` (CREATE, UPDATE, DELETE).
//!
//! Validation in Volcano's order, first failing step wins: field checks (quantities,
//! guarantee ≤ deserved ≤ capability, state, hierarchy annotations), the parent (exists, not
//! itself, depth, no allocated pods when it gets its first child), root protection, then the
//! resource hierarchy (a child's capability within its ancestors', siblings' guarantees and
//! deserved shares within the parent's, a parent's capability covering its descendants').

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::json;

use super::bounds;
use super::review::{Decision, Operation, Request};
use super::view::ClusterView;
use super::{AdmissionConfig, decode, decode_old, patch, working_copy};
use tephra_api::keys::{
    DEFAULT_QUEUE, HIERARCHY_ANNOTATION, HIERARCHY_WEIGHTS_ANNOTATION, ROOT_QUEUE,
};
use tephra_api::quantity;
use tephra_api::scheduling::QueueState;
use tephra_api::{Queue, ResourceList};

/// `/queues/mutate`: `root/` before a hierarchy that lacks it (and `1/` before its weights),
/// `reclaimable: true`, `weight: 1`.
pub fn mutate(req: &Request) -> Decision {
    if req.operation != Operation::Create {
        return Decision::bad_request(format!(
            "invalid operation `{}`, expect operation to be `CREATE`",
            req.operation.as_str()
        ));
    }
    let q: Queue = match decode(req) {
        Ok(q) => q,
        Err(d) => return d,
    };
    let mut obj = working_copy(req);
    let annotations = q.metadata.annotations.clone().unwrap_or_default();
    let hierarchy = annotations
        .get(HIERARCHY_ANNOTATION)
        .cloned()
        .unwrap_or_default();
    let weights = annotations
        .get(HIERARCHY_WEIGHTS_ANNOTATION)
        .cloned()
        .unwrap_or_default();
    if !hierarchy.is_empty() && !weights.is_empty() && !hierarchy.starts_with(ROOT_QUEUE) {
        let at = ["metadata", "annotations"];
        patch::set(
            &mut obj,
            &at,
            HIERARCHY_ANNOTATION,
            json!(format!("root/{hierarchy}")),
        );
        patch::set(
            &mut obj,
            &at,
            HIERARCHY_WEIGHTS_ANNOTATION,
            json!(format!("1/{weights}")),
        );
    }
    if q.spec.reclaimable.is_none() {
        patch::set(&mut obj, &["spec"], "reclaimable", json!(true));
    }
    if q.spec.weight.unwrap_or(0) == 0 {
        patch::set(&mut obj, &["spec"], "weight", json!(1));
    }
    Decision::mutate(obj)
}

/// `/queues/validate`.
pub fn validate(req: &Request, view: &dyn ClusterView, cfg: &AdmissionConfig) -> Decision {
    let result = match req.operation {
        Operation::Create | Operation::Update => {
            let q: Queue = match decode(req) {
                Ok(q) => q,
                Err(d) => return d,
            };
            let old: Option<Queue> = if req.operation == Operation::Update {
                match decode_old(req) {
                    Ok(o) => Some(o),
                    Err(d) => return d,
                }
            } else {
                None
            };
            validate_write(&q, old.as_ref(), view, cfg)
        }
        Operation::Delete => validate_delete(req, view, cfg),
        _ => {
            return Decision::bad_request(format!(
                "invalid operation `{}`, expect operation to be `CREATE`, `UPDATE` or `DELETE`",
                req.operation.as_str()
            ));
        }
    };
    match result {
        Ok(()) => Decision::allow(),
        Err(msg) => Decision::deny(msg),
    }
}

fn name(q: &Queue) -> &str {
    q.metadata.name.as_deref().unwrap_or_default()
}

fn parent(q: &Queue) -> &str {
    q.spec.parent.as_deref().unwrap_or_default()
}

fn is_top(parent: &str) -> bool {
    parent.is_empty() || parent == ROOT_QUEUE
}

fn guarantee(q: &Queue) -> Option<&ResourceList> {
    q.spec.guarantee.as_ref().and_then(|g| g.resource.as_ref())
}

/// A resource list as numbers (base units); unreadable quantities count as 0 (the field
/// checks report them first).
type Amounts = BTreeMap<String, f64>;

fn amounts(list: Option<&ResourceList>) -> Amounts {
    list.into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), quantity::parse(&v.0).unwrap_or(0.0)))
        .collect()
}

fn add(total: &mut Amounts, more: &Amounts) {
    for (k, v) in more {
        *total.entry(k.clone()).or_insert(0.0) += v;
    }
}

/// True when `limit` is below `total` in some dimension where `total` is non-zero (Volcano's
/// `LessPartly` with a zero default): a limit that does not mention a resource allows none.
fn exceeds(total: &Amounts, limit: &Amounts) -> bool {
    total
        .iter()
        .any(|(k, v)| *v > 0.0 && limit.get(k).copied().unwrap_or(0.0) < v - v.abs() * 1e-12)
}

fn fmt_amount(resource: &str, v: f64) -> String {
    match resource {
        "cpu" => {
            if v.fract() == 0.0 {
                format!("{v}")
            } else {
                format!("{}m", (v * 1000.0).round())
            }
        }
        "memory" => {
            for (suffix, scale) in [("Ti", 4), ("Gi", 3), ("Mi", 2), ("Ki", 1)] {
                let unit = 1024f64.powi(scale);
                if v >= unit && (v / unit).fract() == 0.0 {
                    return format!("{}{suffix}", v / unit);
                }
            }
            format!("{v}")
        }
        _ => format!("{v}"),
    }
}

fn fmt_amounts(a: &Amounts) -> String {
    a.iter()
        .map(|(k, v)| format!("{k} {}", fmt_amount(k, *v)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn validate_write(
    q: &Queue,
    old: Option<&Queue>,
    view: &dyn ClusterView,
    cfg: &AdmissionConfig,
) -> Result<(), String> {
    let mut errs = bounds::queue_problems(q, old.is_none());
    errs.extend(field_errors(q, view));
    if !errs.is_empty() {
        return Err(if errs.len() == 1 {
            errs.join("")
        } else {
            format!("[{}]", errs.join(", "))
        });
    }
    let parent_changed = old.is_none_or(|o| parent(o) != parent(q));
    if parent_changed {
        check_parent(q, view, cfg)?;
    }
    let resources_changed = |o: &Queue| {
        o.spec.capability != q.spec.capability
            || o.spec.deserved != q.spec.deserved
            || guarantee(o) != guarantee(q)
    };
    if let Some(o) = old
        && cfg.root_queue_protection
        && name(q) == ROOT_QUEUE
        && resources_changed(o)
    {
        return Err(
            "root queue's resource attributes (capability, deserved, guarantee) cannot be modified"
                .into(),
        );
    }
    if name(q) != ROOT_QUEUE && (parent_changed || old.is_none_or(resources_changed)) {
        check_resources(q, view)?;
    }
    Ok(())
}

fn field_errors(q: &Queue, view: &dyn ClusterView) -> Vec<String> {
    let mut errs = Vec::new();
    let lists = [
        ("capability", q.spec.capability.as_ref()),
        ("deserved", q.spec.deserved.as_ref()),
        ("guarantee.resource", guarantee(q)),
    ];
    for (field, list) in lists {
        for (res, value) in list.into_iter().flatten() {
            let path = format!("requestBody.spec.{field}.{res}");
            match quantity::parse(&value.0) {
                None => errs.push(format!(
                    "{path}: Invalid value: {:?}: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                    value.0
                )),
                Some(v) if v < 0.0 => errs.push(format!(
                    "{path}: Invalid value: {:?}: must be greater than or equal to 0",
                    value.0
                )),
                Some(_) => {}
            }
        }
    }
    let deserved = amounts(q.spec.deserved.as_ref());
    let capability = amounts(q.spec.capability.as_ref());
    for (res, g) in guarantee(q).into_iter().flatten() {
        let gv = quantity::parse(&g.0).unwrap_or(0.0);
        // A guarantee above the capability can never be honoured, whatever `deserved` says;
        // that is the problem to name (Volcano reports only the deserved rule here, which for
        // a queue without `deserved` reads as if the fix were to set it).
        if let Some(c) = capability.get(res)
            && gv > *c
        {
            errs.push(format!(
                "requestBody.spec.guarantee.resource.{res}: Invalid value: {:?}: guarantee[{res}]={} must be <= capability[{res}]={}",
                g.0,
                g.0,
                fmt_amount(res, *c)
            ));
            continue;
        }
        match deserved.get(res) {
            None => errs.push(format!(
                "requestBody.spec.deserved.{res}: Invalid value: \"<nil>\": deserved[{res}] must be >= guarantee[{res}]={}",
                g.0
            )),
            Some(d) if *d < gv => errs.push(format!(
                "requestBody.spec.deserved.{res}: Invalid value: {:?}: deserved[{res}]={} must be >= guarantee[{res}]={}",
                fmt_amount(res, *d),
                fmt_amount(res, *d),
                g.0
            )),
            Some(_) => {}
        }
    }
    for (res, d) in &deserved {
        if let Some(c) = capability.get(res)
            && d > c
        {
            errs.push(format!(
                "requestBody.spec.deserved.{res}: Invalid value: {:?}: deserved[{res}]={} must be <= capability[{res}]={}",
                fmt_amount(res, *d),
                fmt_amount(res, *d),
                fmt_amount(res, *c)
            ));
        }
    }
    if let Some(state) = q.state().map(|s| s.as_str())
        && !state.is_empty()
        && state != "Open"
        && state != "Closed"
    {
        errs.push(format!(
            "requestBody.spec.state: Invalid value: {state:?}: queue state must be in [Open Closed]"
        ));
    }
    if let Some(e) = hierarchy_error(q, view) {
        errs.push(e);
    }
    errs
}

fn hierarchy_error(q: &Queue, view: &dyn ClusterView) -> Option<String> {
    let annotations = q.metadata.annotations.as_ref();
    let get = |k: &str| {
        annotations
            .and_then(|a| a.get(k))
            .map(String::as_str)
            .unwrap_or_default()
    };
    let hierarchy = get(HIERARCHY_ANNOTATION);
    let weights = get(HIERARCHY_WEIGHTS_ANNOTATION);
    if hierarchy.is_empty() && weights.is_empty() {
        return None;
    }
    let path = "requestBody.metadata.annotations";
    if hierarchy.split('/').count() != weights.split('/').count() {
        return Some(format!(
            "{path}: Invalid value: {hierarchy:?}: {HIERARCHY_ANNOTATION} must have the same length with {HIERARCHY_WEIGHTS_ANNOTATION}"
        ));
    }
    for w in weights.split('/') {
        match w.parse::<f64>() {
            Err(e) => {
                return Some(format!(
                    "{path}: Invalid value: {weights:?}: {w} in the {weights} is invalid number: {e}"
                ));
            }
            Ok(v) if v.is_nan() || v <= 0.0 => {
                return Some(format!(
                    "{path}: Invalid value: {weights:?}: {w} in the {weights} must be larger than 0"
                ));
            }
            Ok(_) => {}
        }
    }
    let prefix = format!("{hierarchy}/");
    for other in view.queues() {
        let theirs = other
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(HIERARCHY_ANNOTATION))
            .map(String::as_str)
            .unwrap_or_default();
        if !theirs.is_empty() && name(&other) != name(q) && theirs.starts_with(&prefix) {
            return Some(format!(
                "{path}: Invalid value: {hierarchy:?}: {hierarchy} is not allowed to be in the sub path of {theirs} of queue {}",
                name(&other)
            ));
        }
    }
    None
}

fn allocated_pods(q: &Queue) -> f64 {
    q.status
        .as_ref()
        .and_then(|s| s.allocated.as_ref())
        .and_then(|a| a.get("pods"))
        .and_then(|p| quantity::parse(&p.0))
        .unwrap_or(0.0)
}

fn check_parent(q: &Queue, view: &dyn ClusterView, cfg: &AdmissionConfig) -> Result<(), String> {
    let me = name(q);
    let p = parent(q);
    if is_top(p) {
        return Ok(());
    }
    if p == me {
        return Err(format!("queue {me} cannot use itself as parent"));
    }
    // Depth below root, this queue counting 1. Bounded by the limit, so a loop in the
    // existing parents cannot spin.
    let mut depth = 1;
    let mut up = p.to_string();
    while !is_top(&up) {
        depth += 1;
        if depth > cfg.max_queue_depth {
            return Err(format!(
                "queue {me} exceeds the maximum allowed depth of {}",
                cfg.max_queue_depth
            ));
        }
        match view.queue(&up) {
            Some(pq) => up = parent(&pq).to_string(),
            None => {
                return Err(format!(
                    "failed to get parent queue {up} of queue {me}: queue {up:?} not found"
                ));
            }
        }
    }
    let Some(pq) = view.queue(p) else {
        return Err(format!(
            "failed to get parent queue of queue {me}: queue {p:?} not found"
        ));
    };
    if view.child_queues(p).is_empty() {
        let pods = allocated_pods(&pq);
        if pods > 0.0 {
            return Err(format!(
                "queue {p} cannot be the parent queue of queue {me} because it has allocated Pods: {pods}"
            ));
        }
    }
    Ok(())
}

/// The nearest ancestor (below root) whose capability sets `res` above zero.
fn ancestor_capability(q: &Queue, res: &str, view: &dyn ClusterView) -> Option<f64> {
    let mut seen = BTreeSet::new();
    let mut up = parent(q).to_string();
    while !is_top(&up) && seen.insert(up.clone()) {
        let pq = view.queue(&up)?;
        if let Some(v) = amounts(pq.spec.capability.as_ref()).get(res)
            && *v > 0.0
        {
            return Some(*v);
        }
        up = parent(&pq).to_string();
    }
    None
}

/// The largest capability for `res` in the subtree under `q`: its own if set, else its
/// children's.
fn subtree_max_capability(
    q: &Queue,
    res: &str,
    view: &dyn ClusterView,
    seen: &mut BTreeSet<String>,
) -> f64 {
    if !seen.insert(name(q).to_string()) {
        return 0.0;
    }
    if let Some(v) = amounts(q.spec.capability.as_ref()).get(res)
        && *v > 0.0
    {
        return *v;
    }
    view.child_queues(name(q))
        .iter()
        .map(|c| subtree_max_capability(c, res, view, seen))
        .fold(0.0, f64::max)
}

fn check_sums(children: &[&Queue], limit_owner: &Queue, prefix: &str) -> Result<(), String> {
    let mut g_total = Amounts::new();
    let mut d_total = Amounts::new();
    for c in children {
        add(&mut g_total, &amounts(guarantee(c)));
        add(&mut d_total, &amounts(c.spec.deserved.as_ref()));
    }
    let g_limit = amounts(guarantee(limit_owner));
    if exceeds(&g_total, &g_limit) {
        return Err(format!(
            "{prefix} validation failed: sum of children's guarantee ({}) exceeds parent's guarantee limit ({})",
            fmt_amounts(&g_total),
            fmt_amounts(&g_limit)
        ));
    }
    let d_limit = amounts(limit_owner.spec.deserved.as_ref());
    if exceeds(&d_total, &d_limit) {
        return Err(format!(
            "{prefix} validation failed: sum of children's deserved ({}) exceeds parent's deserved limit ({})",
            fmt_amounts(&d_total),
            fmt_amounts(&d_limit)
        ));
    }
    Ok(())
}

fn check_resources(q: &Queue, view: &dyn ClusterView) -> Result<(), String> {
    let me = name(q);
    let p = parent(q);
    if !is_top(p) {
        let Some(pq) = view.queue(p) else {
            return Err(format!("parent queue {p} not found"));
        };
        for (res, mine) in amounts(q.spec.capability.as_ref()) {
            if let Some(limit) = ancestor_capability(q, &res, view)
                && mine > limit
            {
                return Err(format!(
                    "queue {me} capability[{res}]={} exceeds its ancestor's capability={}",
                    fmt_amount(&res, mine),
                    fmt_amount(&res, limit)
                ));
            }
        }
        let siblings: Vec<Arc<Queue>> = view
            .child_queues(p)
            .into_iter()
            .filter(|s| name(s) != me)
            .collect();
        let mut all: Vec<&Queue> = siblings.iter().map(Arc::as_ref).collect();
        all.push(q);
        check_sums(&all, &pq, &format!("parent queue {p}"))?;
    }
    let children = view.child_queues(me);
    if !children.is_empty() {
        for (res, own) in amounts(q.spec.capability.as_ref()) {
            let mut seen = BTreeSet::from([me.to_string()]);
            let child_max = children
                .iter()
                .map(|c| subtree_max_capability(c, &res, view, &mut seen))
                .fold(0.0, f64::max);
            if own < child_max {
                return Err(format!(
                    "queue {me} capability[{res}]={} is smaller than its descendants' max capability={}",
                    fmt_amount(&res, own),
                    fmt_amount(&res, child_max)
                ));
            }
        }
        let refs: Vec<&Queue> = children.iter().map(Arc::as_ref).collect();
        check_sums(&refs, q, &format!("queue {me}"))?;
    }
    Ok(())
}

fn validate_delete(
    req: &Request,
    view: &dyn ClusterView,
    cfg: &AdmissionConfig,
) -> Result<(), String> {
    let old: Option<Queue> = req
        .old_object
        .as_ref()
        .and_then(|o| o.decode::<Queue>().ok());
    let me = if req.name.is_empty() {
        old.as_ref()
            .map(|o| name(o).to_string())
            .unwrap_or_default()
    } else {
        req.name.clone()
    };
    if me == DEFAULT_QUEUE || me == ROOT_QUEUE {
        return Err(format!("`{me}` queue can not be deleted"));
    }
    // The API server only calls this for a queue it has; if the cache has not seen it yet,
    // the old object stands in.
    let current = view.queue(&me).map(|q| (*q).clone()).or(old);
    // Volcano's rule: a queue is closed (no new jobs, its PodGroups gone) before it goes, so a
    // delete never strands the jobs that still name it.
    if let Some(q) = current.as_ref()
        && !matches!(q.state(), Some(QueueState::Closed))
    {
        return Err(format!(
            "only queue with state `Closed` can be deleted, queue `{me}` state is `{}`",
            q.state().map(ToString::to_string).unwrap_or_default()
        ));
    }
    if cfg.queue_allocated_pods_check
        && let Some(q) = current.as_ref()
    {
        let pods = allocated_pods(q);
        if pods > 0.0 {
            return Err(format!(
                "queue {me} cannot be deleted because it has allocated Pods: {pods}"
            ));
        }
    }
    // A child already being deleted does not hold its parent: Volcano's own e2e cleanup
    // deletes a child (foreground) and its parent right after, before the garbage collector
    // has dropped the child's finalizer.
    let children: Vec<_> = view
        .child_queues(&me)
        .into_iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .collect();
    if !children.is_empty() {
        let names: Vec<&str> = children.iter().map(|c| name(c)).collect();
        return Err(format!(
            "queue {me} can not be deleted because it has {} child queues: {}",
            names.len(),
            names.join(", ")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::Verdict;
    use crate::testutil::{request, request_with, update};
    use crate::view::StaticView;
    use serde_json::Value;
    use tephra_api::scheduling::Guarantee;
    use tephra_api::testing::resources;

    fn obj(q: &Queue) -> Value {
        let mut v = serde_json::to_value(q).unwrap();
        v["apiVersion"] = json!("scheduling.volcano.sh/v1beta1");
        v["kind"] = json!("Queue");
        v
    }

    fn with_guarantee(mut q: Queue, pairs: &[(&str, &str)]) -> Queue {
        q.spec.guarantee = Some(Guarantee {
            resource: Some(resources(pairs)),
        });
        q
    }

    fn deserved(mut q: Queue, pairs: &[(&str, &str)]) -> Queue {
        q.spec.deserved = Some(resources(pairs));
        q
    }

    fn annotate(mut q: Queue, h: &str, w: &str) -> Queue {
        let a = q.metadata.annotations.get_or_insert_with(Default::default);
        a.insert(HIERARCHY_ANNOTATION.into(), h.into());
        a.insert(HIERARCHY_WEIGHTS_ANNOTATION.into(), w.into());
        q
    }

    fn create(q: &Queue, view: &StaticView) -> Decision {
        validate(
            &request("Queue", "CREATE", obj(q)),
            view,
            &AdmissionConfig::default(),
        )
    }

    fn denied_with(d: Decision, want: &str) {
        let msg = d
            .denial()
            .unwrap_or_else(|| panic!("allowed, wanted {want:?}"))
            .to_string();
        assert!(msg.contains(want), "{msg:?} lacks {want:?}");
    }

    #[test]
    fn mutate_defaults() {
        let mut q = Queue::test("q");
        q.spec.weight = None;
        let d = mutate(&request("Queue", "CREATE", obj(&q)));
        let Verdict::Mutate(v) = d.verdict else {
            panic!()
        };
        assert_eq!(v["spec"]["weight"], 1);
        assert_eq!(v["spec"]["reclaimable"], true);
        let mut q = Queue::test("q").weight(3);
        q.spec.reclaimable = Some(false);
        let d = mutate(&request("Queue", "CREATE", obj(&q)));
        let Verdict::Mutate(v) = d.verdict else {
            panic!()
        };
        assert_eq!(v, obj(&q));
    }

    #[test]
    fn mutate_prefixes_the_hierarchy_with_root() {
        let q = annotate(Queue::test("q"), "eng/dev", "2/3");
        let d = mutate(&request("Queue", "CREATE", obj(&q)));
        let Verdict::Mutate(v) = d.verdict else {
            panic!()
        };
        assert_eq!(
            v["metadata"]["annotations"][HIERARCHY_ANNOTATION],
            "root/eng/dev"
        );
        assert_eq!(
            v["metadata"]["annotations"][HIERARCHY_WEIGHTS_ANNOTATION],
            "1/2/3"
        );
        let q = annotate(Queue::test("q"), "root/eng", "1/2");
        let Verdict::Mutate(v) = mutate(&request("Queue", "CREATE", obj(&q))).verdict else {
            panic!()
        };
        assert_eq!(
            v["metadata"]["annotations"][HIERARCHY_ANNOTATION],
            "root/eng"
        );
        let d = mutate(&request("Queue", "UPDATE", obj(&q)));
        assert!(!d.is_allowed());
    }

    #[test]
    fn quantities_must_be_valid_and_non_negative() {
        let v = StaticView::new();
        denied_with(
            create(&Queue::test("q").capability(&[("cpu", "-1")]), &v),
            "must be greater than or equal to 0",
        );
        denied_with(
            create(&Queue::test("q").capability(&[("cpu", "lots")]), &v),
            "quantities must match",
        );
        assert!(
            create(
                &Queue::test("q").capability(&[("cpu", "4"), ("memory", "8Gi")]),
                &v
            )
            .is_allowed()
        );
    }

    #[test]
    fn guarantee_deserved_capability_order() {
        let v = StaticView::new();
        denied_with(
            create(&with_guarantee(Queue::test("q"), &[("cpu", "2")]), &v),
            "deserved[cpu] must be >= guarantee[cpu]=2",
        );
        denied_with(
            create(
                &deserved(
                    with_guarantee(Queue::test("q"), &[("cpu", "2")]),
                    &[("cpu", "1")],
                ),
                &v,
            ),
            "deserved[cpu]=1 must be >= guarantee[cpu]=2",
        );
        denied_with(
            create(
                &deserved(
                    Queue::test("q").capability(&[("cpu", "1")]),
                    &[("cpu", "2")],
                ),
                &v,
            ),
            "deserved[cpu]=2 must be <= capability[cpu]=1",
        );
        let ok = deserved(
            with_guarantee(
                Queue::test("q").capability(&[("cpu", "4")]),
                &[("cpu", "1")],
            ),
            &[("cpu", "2"), ("memory", "1Gi")],
        );
        assert!(create(&ok, &v).is_allowed());
    }

    #[test]
    fn state_must_be_open_or_closed() {
        let v = StaticView::new();
        denied_with(
            create(&Queue::test("q").with_state("Closing".into()), &v),
            "queue state must be in [Open Closed]",
        );
        assert!(create(&Queue::test("q").closed(), &v).is_allowed());
    }

    #[test]
    fn hierarchy_annotations() {
        let v = StaticView::with_queues([annotate(Queue::test("dev"), "root/eng/dev", "1/2/3")]);
        denied_with(
            create(&annotate(Queue::test("q"), "root/a", "1"), &v),
            "must have the same length",
        );
        denied_with(
            create(&annotate(Queue::test("q"), "root/a", "1/x"), &v),
            "invalid number",
        );
        denied_with(
            create(&annotate(Queue::test("q"), "root/a", "1/0"), &v),
            "must be larger than 0",
        );
        denied_with(
            create(&annotate(Queue::test("q"), "root/eng", "1/2"), &v),
            "root/eng is not allowed to be in the sub path of root/eng/dev of queue dev",
        );
        assert!(create(&annotate(Queue::test("q"), "root/en", "1/2"), &v).is_allowed());
    }

    fn tree() -> StaticView {
        StaticView::with_queues([
            Queue::test("root").open(),
            deserved(
                with_guarantee(
                    Queue::test("eng").capability(&[("cpu", "10")]).open(),
                    &[("cpu", "4")],
                ),
                &[("cpu", "8")],
            ),
            deserved(
                with_guarantee(
                    Queue::test("dev")
                        .parent("eng")
                        .capability(&[("cpu", "6")])
                        .open(),
                    &[("cpu", "2")],
                ),
                &[("cpu", "4")],
            ),
            Queue::test("busy").open().with_allocated_pods(),
            Queue::test("l1").parent("root"),
            Queue::test("l2").parent("l1"),
            Queue::test("l3").parent("l2"),
            Queue::test("l4").parent("l3"),
            Queue::test("l5").parent("l4"),
        ])
    }

    trait Allocated {
        fn with_allocated_pods(self) -> Self;
    }
    impl Allocated for Queue {
        fn with_allocated_pods(mut self) -> Self {
            self.status.get_or_insert_with(Default::default).allocated =
                Some(resources(&[("pods", "3")]));
            self
        }
    }

    #[test]
    fn parent_rules() {
        let v = tree();
        denied_with(
            create(&Queue::test("q").parent("q"), &v),
            "cannot use itself as parent",
        );
        denied_with(
            create(&Queue::test("q").parent("ghost"), &v),
            "failed to get parent queue ghost of queue q",
        );
        denied_with(
            create(&Queue::test("q").parent("busy"), &v),
            "queue busy cannot be the parent queue of queue q because it has allocated Pods: 3",
        );
        // l1 is at depth 1, so a child of l4 is at depth 5, the limit.
        assert!(create(&Queue::test("q").parent("l4"), &v).is_allowed());
        denied_with(
            create(&Queue::test("q").parent("l5"), &v),
            "exceeds the maximum allowed depth of 5",
        );
        assert!(create(&Queue::test("q").parent("root"), &v).is_allowed());
    }

    #[test]
    fn child_capability_within_ancestors() {
        let v = tree();
        denied_with(
            create(
                &Queue::test("q").parent("eng").capability(&[("cpu", "12")]),
                &v,
            ),
            "queue q capability[cpu]=12 exceeds its ancestor's capability=10",
        );
        assert!(
            create(
                &Queue::test("q").parent("eng").capability(&[("cpu", "10")]),
                &v
            )
            .is_allowed()
        );
        // The nearest ancestor that sets the resource counts.
        denied_with(
            create(
                &Queue::test("q").parent("dev").capability(&[("cpu", "7")]),
                &v,
            ),
            "ancestor's capability=6",
        );
    }

    #[test]
    fn siblings_sums_within_parent() {
        let v = tree();
        denied_with(
            create(
                &deserved(
                    with_guarantee(Queue::test("q").parent("eng"), &[("cpu", "3")]),
                    &[("cpu", "3")],
                ),
                &v,
            ),
            "parent queue eng validation failed: sum of children's guarantee (cpu 5) exceeds parent's guarantee limit (cpu 4)",
        );
        denied_with(
            create(
                &deserved(Queue::test("q").parent("eng"), &[("cpu", "5")]),
                &v,
            ),
            "sum of children's deserved (cpu 9) exceeds parent's deserved limit (cpu 8)",
        );
        // A parent without a guarantee admits no child guarantee.
        denied_with(
            create(
                &deserved(
                    with_guarantee(Queue::test("q").parent("l1"), &[("cpu", "1")]),
                    &[("cpu", "1")],
                ),
                &v,
            ),
            "exceeds parent's guarantee limit",
        );
        assert!(
            create(
                &deserved(
                    with_guarantee(Queue::test("q").parent("eng"), &[("cpu", "2")]),
                    &[("cpu", "4")]
                ),
                &v
            )
            .is_allowed()
        );
    }

    #[test]
    fn parent_must_cover_its_children() {
        let v = tree();
        let old = obj(&v.queue("eng").unwrap());
        let shrunk = deserved(
            with_guarantee(
                Queue::test("eng").capability(&[("cpu", "5")]).open(),
                &[("cpu", "4")],
            ),
            &[("cpu", "5")],
        );
        let d = validate(
            &update("Queue", old.clone(), obj(&shrunk)),
            &v,
            &AdmissionConfig::default(),
        );
        denied_with(
            d,
            "queue eng capability[cpu]=5 is smaller than its descendants' max capability=6",
        );
        let small_guarantee = deserved(
            with_guarantee(
                Queue::test("eng").capability(&[("cpu", "10")]).open(),
                &[("cpu", "1")],
            ),
            &[("cpu", "8")],
        );
        let d = validate(
            &update("Queue", old.clone(), obj(&small_guarantee)),
            &v,
            &AdmissionConfig::default(),
        );
        denied_with(
            d,
            "queue eng validation failed: sum of children's guarantee (cpu 2) exceeds parent's guarantee limit (cpu 1)",
        );
        // An update that does not touch resources or parent skips the hierarchy checks.
        let mut relabeled = v.queue("eng").unwrap().as_ref().clone();
        relabeled.metadata.labels = Some([("team".to_string(), "x".to_string())].into());
        assert!(
            validate(
                &update("Queue", old, obj(&relabeled)),
                &v,
                &AdmissionConfig::default()
            )
            .is_allowed()
        );
    }

    #[test]
    fn root_queue_protection() {
        let v = tree();
        let old = obj(&Queue::test("root").open());
        let new = obj(&Queue::test("root").capability(&[("cpu", "1")]).open());
        denied_with(
            validate(
                &update("Queue", old.clone(), new.clone()),
                &v,
                &AdmissionConfig::default(),
            ),
            "root queue's resource attributes (capability, deserved, guarantee) cannot be modified",
        );
        let cfg = AdmissionConfig {
            root_queue_protection: false,
            ..AdmissionConfig::default()
        };
        assert!(validate(&update("Queue", old.clone(), new), &v, &cfg).is_allowed());
        assert!(
            validate(
                &update("Queue", old, obj(&Queue::test("root").weight(2).open())),
                &v,
                &AdmissionConfig::default()
            )
            .is_allowed()
        );
    }

    fn delete(name: &str, v: &StaticView, cfg: &AdmissionConfig) -> Decision {
        let old = v.queue(name).map(|q| obj(&q));
        let mut req = request_with("Queue", "DELETE", "", Value::Null, old);
        req.name = name.into();
        validate(&req, v, cfg)
    }

    #[test]
    fn delete_rules() {
        let v = tree();
        let cfg = AdmissionConfig::default();
        denied_with(
            delete("default", &v, &cfg),
            "`default` queue can not be deleted",
        );
        denied_with(delete("root", &v, &cfg), "`root` queue can not be deleted");
        // Only a Closed queue goes; one never synced has no state to show.
        denied_with(
            delete("dev", &v, &cfg),
            "only queue with state `Closed` can be deleted, queue `dev` state is `Open`",
        );
        denied_with(
            delete("l5", &v, &cfg),
            "only queue with state `Closed` can be deleted, queue `l5` state is ``",
        );
        for closing in ["eng", "dev", "busy"] {
            let mut q = (*v.queue(closing).unwrap()).clone();
            q.status.get_or_insert_default().state = Some(QueueState::Closed);
            v.apply_queue(q);
        }
        denied_with(
            delete("eng", &v, &cfg),
            "queue eng can not be deleted because it has 1 child queues: dev",
        );
        assert!(delete("dev", &v, &cfg).is_allowed());
        assert!(delete("busy", &v, &cfg).is_allowed());
        // Once its only child is being deleted, the parent may go too.
        let mut dying = Queue::test("dev").parent("eng").closed();
        dying.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ));
        v.apply_queue(dying);
        assert!(delete("eng", &v, &cfg).is_allowed());
        let strict = AdmissionConfig {
            queue_allocated_pods_check: true,
            ..AdmissionConfig::default()
        };
        denied_with(
            delete("busy", &v, &strict),
            "queue busy cannot be deleted because it has allocated Pods: 3",
        );
    }

    #[test]
    fn other_operations_are_refused() {
        let d = validate(
            &request("Queue", "CONNECT", obj(&Queue::test("q"))),
            &StaticView::new(),
            &AdmissionConfig::default(),
        );
        denied_with(d, "expect operation to be `CREATE`, `UPDATE` or `DELETE`");
    }

    /// A guarantee above the capability is said as such, with or without `deserved`.
    #[test]
    fn guarantee_above_capability_says_so() {
        let v = StaticView::new();
        let want = "requestBody.spec.guarantee.resource.cpu: Invalid value: \"4\": guarantee[cpu]=4 must be <= capability[cpu]=2";
        let q = with_guarantee(
            Queue::test("q").capability(&[("cpu", "2")]),
            &[("cpu", "4")],
        );
        assert_eq!(create(&q, &v).denial(), Some(want));
        let q = deserved(q, &[("cpu", "1")]);
        assert_eq!(create(&q, &v).denial(), Some(want));
        // Within the capability, Volcano's deserved rule still applies.
        let q = with_guarantee(
            Queue::test("q").capability(&[("cpu", "8")]),
            &[("cpu", "4")],
        );
        denied_with(create(&q, &v), "deserved[cpu] must be >= guarantee[cpu]=4");
    }

    /// The example: a negative weight is refused (the mutation defaults only 0).
    #[test]
    fn negative_weight_is_refused() {
        let v = StaticView::new();
        let q = Queue::test("q").weight(-1);
        assert_eq!(
            create(&q, &v).denial(),
            Some("spec.weight: Invalid value: -1: must be between 1 and 65535, inclusive")
        );
    }
}
