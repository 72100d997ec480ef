//! A pod's resource requests as Kubernetes counts them for quota, in exact integer arithmetic,
//! and the `minResources` of a gang. Pure code.
//!
//! Quantities are held in nano-units (`i128`), so `100m + 0.9` is exactly `1` and sums of
//! thousands of pods never drift, which matters because an update is issued only when the
//! computed value differs from the stored one.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use tephra_api::ResourceList;

/// One unit in nano-units.
const NANO: i128 = 1_000_000_000;

/// Resource amounts by name, in nano-units.
pub type Amounts = BTreeMap<String, i128>;

/// The exact value of a Kubernetes quantity in nano-units (rounded up, as Kubernetes rounds
/// sub-nano precision), or `None` when the string is not a quantity.
pub fn parse_nano(s: &str) -> Option<i128> {
    let s = s.trim();
    let (neg, rest) = match s.as_bytes().first()? {
        b'+' => (false, &s[1..]),
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (num, suffix) = rest.split_at(end);
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
        return None;
    }
    if int_part.len() + frac_part.len() > 30 {
        return None;
    }
    let digits: i128 = format!("{int_part}{frac_part}").parse().ok()?;
    // value = digits / 10^frac * multiplier; multiplier as (numerator, power of ten).
    let (mult, pow10): (i128, i32) = match suffix {
        "" => (1, 0),
        "n" => (1, -9),
        "u" => (1, -6),
        "m" => (1, -3),
        "k" => (1, 3),
        "M" => (1, 6),
        "G" => (1, 9),
        "T" => (1, 12),
        "P" => (1, 15),
        "E" => (1, 18),
        "Ki" => (1 << 10, 0),
        "Mi" => (1 << 20, 0),
        "Gi" => (1 << 30, 0),
        "Ti" => (1 << 40, 0),
        "Pi" => (1 << 50, 0),
        "Ei" => (1 << 60, 0),
        exp => {
            let e = exp.strip_prefix(['e', 'E'])?;
            let body = e.strip_prefix(['+', '-']).unwrap_or(e);
            if body.is_empty() || body.len() > 3 || !body.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            (1, e.parse().ok()?)
        }
    };
    // nano = digits * mult * 10^(9 + pow10 - frac_len)
    let shift = 9 + pow10 - i32::try_from(frac_part.len()).ok()?;
    let base = digits.checked_mul(mult)?;
    let value = if shift >= 0 {
        base.checked_mul(10i128.checked_pow(u32::try_from(shift).ok()?)?)?
    } else {
        let div = 10i128.checked_pow(u32::try_from(-shift).ok()?)?;
        // Round up, as resource.Quantity does when it drops precision.
        (base + div - 1) / div
    };
    Some(if neg { -value } else { value })
}

/// Whether a resource is counted in bytes (so its total is written with a binary suffix).
fn is_bytes(name: &str) -> bool {
    matches!(name, "memory" | "ephemeral-storage") || name.starts_with("hugepages-")
}

/// A nano-unit amount written back as a quantity: whole numbers plainly (bytes with the
/// largest exact binary suffix), fractions in `m` or `n`.
pub fn format_nano(name: &str, v: i128) -> Quantity {
    if v % NANO != 0 {
        return Quantity(if v % 1_000_000 == 0 {
            format!("{}m", v / 1_000_000)
        } else {
            format!("{v}n")
        });
    }
    let whole = v / NANO;
    if is_bytes(name) && whole != 0 {
        for (suffix, unit) in [
            ("Ei", 1i128 << 60),
            ("Pi", 1 << 50),
            ("Ti", 1 << 40),
            ("Gi", 1 << 30),
            ("Mi", 1 << 20),
            ("Ki", 1 << 10),
        ] {
            if whole % unit == 0 {
                return Quantity(format!("{}{suffix}", whole / unit));
            }
        }
    }
    Quantity(whole.to_string())
}

/// A resource list in nano-units; entries that do not parse are skipped (the API validates
/// quantities, so this only guards against objects that bypassed validation).
pub fn amounts(list: Option<&ResourceList>) -> Amounts {
    let mut out = Amounts::new();
    for (k, q) in list.into_iter().flatten() {
        if let Some(v) = parse_nano(&q.0) {
            *out.entry(k.clone()).or_default() += v;
        }
    }
    out
}

/// A container's effective requests: Kubernetes defaults a missing request to the limit
/// (API-server defaulting), which is how a GPU given only under `limits` is requested.
fn container_requests(c: &Container) -> Amounts {
    let Some(ResourceRequirements {
        requests, limits, ..
    }) = c.resources.as_ref()
    else {
        return Amounts::new();
    };
    let mut out = amounts(limits.as_ref());
    out.extend(amounts(requests.as_ref()));
    out
}

fn add(into: &mut Amounts, other: &Amounts) {
    for (k, v) in other {
        *into.entry(k.clone()).or_default() += v;
    }
}

fn max_into(into: &mut Amounts, other: &Amounts) {
    for (k, v) in other {
        let e = into.entry(k.clone()).or_default();
        *e = (*e).max(*v);
    }
}

/// A pod's requests as the Kubernetes quota evaluator counts them (`PodRequests`): the larger
/// of (regular containers + restartable "sidecar" init containers) and, for each ordinary init
/// container, itself plus the sidecars started before it; then `spec.overhead`. Pod-level
/// `spec.resources.requests`, when given, replace the container sums. `pods` is 1.
///
/// Unlike Volcano (which copies the quota keys `count/pods`, `requests.cpu`, `limits.*`), only
/// plain resource names come out: that is what the scheduler reads.
pub fn pod_requests(pod: &Pod) -> Amounts {
    let mut out = Amounts::new();
    if let Some(spec) = pod.spec.as_ref() {
        let mut sum = Amounts::new();
        for c in &spec.containers {
            add(&mut sum, &container_requests(c));
        }
        let mut sidecars = Amounts::new();
        let mut init_peak = Amounts::new();
        for c in spec.init_containers.iter().flatten() {
            let req = container_requests(c);
            if c.restart_policy.as_deref() == Some("Always") {
                add(&mut sidecars, &req);
                // A sidecar runs alongside every later init container.
                max_into(&mut init_peak, &sidecars);
            } else {
                let mut at_start = sidecars.clone();
                add(&mut at_start, &req);
                max_into(&mut init_peak, &at_start);
            }
        }
        add(&mut sum, &sidecars);
        max_into(&mut sum, &init_peak);
        if let Some(pod_level) = spec.resources.as_ref().and_then(|r| r.requests.as_ref()) {
            // PodLevelResources: the pod-level figure stands for every resource it names.
            sum.extend(amounts(Some(pod_level)));
        }
        add(&mut sum, &amounts(spec.overhead.as_ref()));
        out = sum;
    }
    out.retain(|_, v| *v > 0);
    out.insert("pods".into(), NANO);
    out
}

/// `minResources` of a gang of `min_member` pods like `pod`.
pub fn min_resources(pod: &Pod, min_member: i32) -> ResourceList {
    let n = i128::from(min_member.max(0));
    pod_requests(pod)
        .into_iter()
        .filter(|(_, v)| *v * n != 0)
        .map(|(k, v)| {
            let q = format_nano(&k, v * n);
            (k, q)
        })
        .collect()
}

/// Whether two resource lists hold the same amounts (`1000m` equals `1`), so a list written
/// in another notation is not rewritten.
pub fn same_amounts(a: Option<&ResourceList>, b: Option<&ResourceList>) -> bool {
    let clean = |l| {
        let mut m = amounts(l);
        m.retain(|_, v| *v != 0);
        m
    };
    clean(a) == clean(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }

    #[test]
    fn parses_quantities_exactly() {
        assert_eq!(parse_nano("1"), Some(NANO));
        assert_eq!(parse_nano("100m"), Some(NANO / 10));
        assert_eq!(parse_nano("0.1"), Some(NANO / 10));
        assert_eq!(parse_nano("1Gi"), Some((1i128 << 30) * NANO));
        assert_eq!(parse_nano("1.5Gi"), Some((3i128 << 29) * NANO));
        assert_eq!(parse_nano("2k"), Some(2000 * NANO));
        assert_eq!(parse_nano("1e3"), Some(1000 * NANO));
        assert_eq!(parse_nano("1n"), Some(1));
        assert_eq!(parse_nano("0.5n"), Some(1), "rounded up");
        assert_eq!(parse_nano("-2"), Some(-2 * NANO));
        for bad in ["", "x", "1x", "1.2.3", "Gi", "1e", "."] {
            assert_eq!(parse_nano(bad), None, "{bad}");
        }
    }

    #[test]
    fn formats_back_readably() {
        assert_eq!(format_nano("cpu", 4 * NANO).0, "4");
        assert_eq!(format_nano("cpu", 1500 * NANO / 1000).0, "1500m");
        assert_eq!(format_nano("memory", (4i128 << 30) * NANO).0, "4Gi");
        assert_eq!(format_nano("memory", 1000 * NANO).0, "1000");
        assert_eq!(format_nano("nvidia.com/gpu", 1024 * NANO).0, "1024");
    }

    #[test]
    fn regular_containers_add_up_and_limits_default_requests() {
        let p = pod(json!({"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2", "nvidia.com/gpu": "1"}}},
        ]}));
        let r = pod_requests(&p);
        assert_eq!(r["cpu"], 1500 * NANO / 1000);
        assert_eq!(r["memory"], (1i128 << 30) * NANO);
        assert_eq!(r["nvidia.com/gpu"], NANO, "GPU from limits only");
        assert_eq!(r["pods"], NANO);
    }

    #[test]
    fn init_containers_count_as_kubernetes_counts_them() {
        // Init "big" (4 cpu) runs alone after sidecar (1 cpu) started: peak 5; steady state
        // is main 2 + sidecar 1 = 3; so 5.
        let p = pod(json!({
            "initContainers": [
                {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                {"name": "big", "resources": {"requests": {"cpu": "4", "memory": "1Gi"}}},
            ],
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "2", "memory": "2Gi"}}}],
            "overhead": {"cpu": "100m"},
        }));
        let r = pod_requests(&p);
        assert_eq!(r["cpu"], 5100 * NANO / 1000);
        assert_eq!(
            r["memory"],
            (2i128 << 30) * NANO,
            "max(steady 2Gi, init 1Gi)"
        );
        // A sidecar declared after the init container does not add to it.
        let p = pod(json!({
            "initContainers": [
                {"name": "big", "resources": {"requests": {"cpu": "4"}}},
                {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
            ],
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "2"}}}],
        }));
        assert_eq!(pod_requests(&p)["cpu"], 4 * NANO);
    }

    #[test]
    fn min_resources_multiplies_and_keeps_gpus() {
        let p = pod(json!({"containers": [{"name": "m", "resources": {
            "requests": {"cpu": "250m", "memory": "512Mi", "nvidia.com/gpu": "1"}}}]}));
        let r = min_resources(&p, 4);
        assert_eq!(r["cpu"].0, "1");
        assert_eq!(r["memory"].0, "2Gi");
        assert_eq!(r["nvidia.com/gpu"].0, "4");
        assert_eq!(r["pods"].0, "4");
        assert!(!r.keys().any(|k| k.contains('/') && k != "nvidia.com/gpu"));
        assert!(min_resources(&p, 0).is_empty());
    }

    #[test]
    fn same_amounts_ignores_notation() {
        let a = tephra_api::testing::resources(&[("cpu", "1000m"), ("memory", "1024Mi")]);
        let b = tephra_api::testing::resources(&[("cpu", "1"), ("memory", "1Gi")]);
        assert!(same_amounts(Some(&a), Some(&b)));
        let c = tephra_api::testing::resources(&[("cpu", "2")]);
        assert!(!same_amounts(Some(&a), Some(&c)));
        assert!(same_amounts(None, Some(&Default::default())));
    }
}
