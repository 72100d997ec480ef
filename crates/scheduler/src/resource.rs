//! Resource vectors as the session counts them: cpu in millicores, memory in bytes, and every
//! other resource (`pods`, `ephemeral-storage`, `nvidia.com/gpu`, hugepages) as a milli-scaled
//! scalar, so that one comparison rule covers them all.
//!
//! Comparisons allow an epsilon of 0.1 per dimension, as Volcano's do: quantities written as
//! `0.1` cpu and `100m` must compare equal after floating-point arithmetic.

use std::fmt;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use litemap::LiteMap;

use tephra_api::quantity;

/// The tolerance of every comparison, per dimension.
pub const EPSILON: f64 = 0.1;

/// The scalar name under which a pod counts one slot of a node's `pods` capacity.
pub const PODS: &str = "pods";

/// A vector of resources. Missing scalars are zero.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resource {
    /// Millicores.
    pub milli_cpu: f64,
    /// Bytes.
    pub memory: f64,
    /// Every other resource, milli-scaled (`nvidia.com/gpu: 1` is 1000), by name. A sorted
    /// vector rather than a tree: a pod's requests hold one or two (`pods` always), and the
    /// index keeps one per pod.
    pub scalars: LiteMap<String, f64>,
}

/// Resource names that are quota keys or not scalar resources at all. A PodGroup written by
/// Volcano's controller carries `count/pods`, `requests.cpu`, `limits.memory`; they are not
/// what the scheduler compares, and Volcano's reader skips them too.
fn is_ignored_name(name: &str) -> bool {
    name.starts_with("count/")
        || name.starts_with("requests.")
        || name.starts_with("limits.")
        || name.contains('*')
}

impl Resource {
    /// The empty vector.
    pub fn zero() -> Self {
        Self::default()
    }

    /// A vector of cpu (millicores) and memory (bytes) only; handy in tests.
    pub fn new(milli_cpu: f64, memory: f64) -> Self {
        Self {
            milli_cpu,
            memory,
            scalars: LiteMap::new(),
        }
    }

    /// Adds a scalar (milli-scaled) and returns the vector.
    pub fn with_scalar(mut self, name: &str, milli: f64) -> Self {
        self.scalars.insert(name.to_string(), milli);
        self
    }

    /// Reads a Kubernetes resource list; quantities that do not parse and quota-style names
    /// are skipped.
    pub fn from_list<'a>(list: impl IntoIterator<Item = (&'a String, &'a Quantity)>) -> Self {
        let mut r = Self::zero();
        for (name, q) in list {
            let Some(v) = quantity::parse(&q.0) else {
                continue;
            };
            if !v.is_finite() || v < 0.0 || is_ignored_name(name) {
                continue;
            }
            match name.as_str() {
                "cpu" => r.milli_cpu += v * 1000.0,
                "memory" => r.memory += v,
                other => *r.scalars.entry(other.to_string()).or_default() += v * 1000.0,
            }
        }
        r
    }

    /// The value of one named dimension (`cpu` in millicores, `memory` in bytes, scalars milli).
    pub fn get(&self, name: &str) -> f64 {
        match name {
            "cpu" => self.milli_cpu,
            "memory" => self.memory,
            other => self.scalars.get(other).copied().unwrap_or(0.0),
        }
    }

    /// Names of the dimensions this vector has (cpu and memory always).
    pub fn dimensions(&self) -> impl Iterator<Item = &str> {
        ["cpu", "memory"]
            .into_iter()
            .chain(self.scalars.keys().map(String::as_str))
    }

    /// `true` when nothing but (possibly) `pods` is requested.
    pub fn is_empty(&self) -> bool {
        self.milli_cpu < EPSILON
            && self.memory < EPSILON
            && self.scalars.iter().all(|(k, v)| k == PODS || *v < EPSILON)
    }

    /// `self += other`.
    pub fn add(&mut self, other: &Resource) -> &mut Self {
        self.milli_cpu += other.milli_cpu;
        self.memory += other.memory;
        for (k, v) in &other.scalars {
            *self.scalars.entry(k.clone()).or_default() += v;
        }
        self
    }

    /// `self -= other`, never below zero (a watch event seen twice must not make capacity
    /// negative and poison every later comparison).
    pub fn sub(&mut self, other: &Resource) -> &mut Self {
        self.milli_cpu = (self.milli_cpu - other.milli_cpu).max(0.0);
        self.memory = (self.memory - other.memory).max(0.0);
        for (k, v) in &other.scalars {
            let e = self.scalars.entry(k.clone()).or_default();
            *e = (*e - v).max(0.0);
        }
        self
    }

    /// `self - other` as a new vector (clamped at zero).
    pub fn minus(&self, other: &Resource) -> Resource {
        let mut r = self.clone();
        r.sub(other);
        r
    }

    /// `self + other` as a new vector.
    pub fn plus(&self, other: &Resource) -> Resource {
        let mut r = self.clone();
        r.add(other);
        r
    }

    /// Every dimension multiplied by `f`.
    pub fn scaled(&self, f: f64) -> Resource {
        Resource {
            milli_cpu: self.milli_cpu * f,
            memory: self.memory * f,
            scalars: self
                .scalars
                .iter()
                .map(|(k, v)| (k.clone(), v * f))
                .collect(),
        }
    }

    /// Per-dimension minimum over the dimensions of either (a scalar missing on one side is 0).
    pub fn min_with(&self, other: &Resource) -> Resource {
        let mut r = Resource::new(
            self.milli_cpu.min(other.milli_cpu),
            self.memory.min(other.memory),
        );
        for k in self.scalars.keys().chain(other.scalars.keys()) {
            r.scalars.insert(k.clone(), self.get(k).min(other.get(k)));
        }
        r
    }

    /// Per-dimension maximum.
    pub fn max_with(&self, other: &Resource) -> Resource {
        let mut r = Resource::new(
            self.milli_cpu.max(other.milli_cpu),
            self.memory.max(other.memory),
        );
        for k in self.scalars.keys().chain(other.scalars.keys()) {
            r.scalars.insert(k.clone(), self.get(k).max(other.get(k)));
        }
        r
    }

    /// `self ≤ other` in every dimension of either; a scalar missing on the right is 0.
    pub fn less_equal(&self, other: &Resource) -> bool {
        le(self.milli_cpu, other.milli_cpu)
            && le(self.memory, other.memory)
            && self.scalars.iter().all(|(k, v)| le(*v, other.get(k)))
    }

    /// `self ≤ other` only in the dimensions `req` asks for (non-zero in `req`).
    pub fn less_equal_in(&self, other: &Resource, req: &Resource) -> bool {
        (req.milli_cpu <= 0.0 || le(self.milli_cpu, other.milli_cpu))
            && (req.memory <= 0.0 || le(self.memory, other.memory))
            && req
                .scalars
                .iter()
                .filter(|(_, v)| **v > 0.0)
                .all(|(k, _)| le(self.get(k), other.get(k)))
    }

    /// The first dimension (in cpu, memory, scalar order) where `self` exceeds `other`.
    pub fn first_exceeding(&self, other: &Resource) -> Option<String> {
        if !le(self.milli_cpu, other.milli_cpu) {
            return Some("cpu".into());
        }
        if !le(self.memory, other.memory) {
            return Some("memory".into());
        }
        self.scalars
            .iter()
            .find(|(k, v)| !le(**v, other.get(k)))
            .map(|(k, _)| k.clone())
    }

    /// [`Self::first_exceeding`] against `allocatable - used` (clamped at zero, as
    /// [`Self::minus`]), without building the difference: a scheduler checks this for every
    /// node in every cycle.
    pub fn first_exceeding_free(&self, allocatable: &Resource, used: &Resource) -> Option<&str> {
        let free = |a: f64, u: f64| (a - u).max(0.0);
        if !le(self.milli_cpu, free(allocatable.milli_cpu, used.milli_cpu)) {
            return Some("cpu");
        }
        if !le(self.memory, free(allocatable.memory, used.memory)) {
            return Some("memory");
        }
        self.scalars
            .iter()
            .find(|(k, v)| !le(**v, free(allocatable.get(k), used.get(k))))
            .map(|(k, _)| k.as_str())
    }

    /// The dominant share of `self` against `total`: the largest per-dimension ratio over the
    /// dimensions of `total` (a dimension with total 0 counts 0 when nothing is used, else 1).
    pub fn share_of(&self, total: &Resource) -> f64 {
        total
            .dimensions()
            .map(|d| share(self.get(d), total.get(d)))
            .fold(0.0, f64::max)
    }
}

fn le(a: f64, b: f64) -> bool {
    a < b || (a - b).abs() < EPSILON
}

/// One dimension's share, as Volcano's `helpers.Share` computes it.
pub fn share(used: f64, total: f64) -> f64 {
    if total <= 0.0 {
        if used <= 0.0 { 0.0 } else { 1.0 }
    } else {
        used / total
    }
}

impl Resource {
    /// The same vector restricted to the dimensions `req` asks for (non-zero in `req`), for
    /// messages that should speak only of what a gang needs.
    pub fn only_dims_of(&self, req: &Resource) -> Resource {
        let mut r = Resource::zero();
        if req.milli_cpu > 0.0 {
            r.milli_cpu = self.milli_cpu;
        }
        if req.memory > 0.0 {
            r.memory = self.memory;
        }
        for (k, v) in &req.scalars {
            if *v > 0.0 && k != PODS {
                r.scalars.insert(k.clone(), self.get(k));
            }
        }
        r
    }
}

impl Resource {
    /// The named dimensions with their amounts, zero ones included (`cpu 0, nvidia.com/gpu 0`),
    /// for messages that must name what is short.
    pub fn describe(&self, dims: &[&str]) -> String {
        dims.iter()
            .map(|d| match *d {
                "cpu" => {
                    let v = self.milli_cpu;
                    if v % 1000.0 == 0.0 {
                        format!("cpu {}", v / 1000.0)
                    } else {
                        format!("cpu {v:.0}m")
                    }
                }
                "memory" => format!("memory {}", human_bytes(self.memory)),
                other => format!("{other} {}", self.get(other) / 1000.0),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The dimensions `self` asks for (above zero; the `pods` slot left out).
    pub fn asked_dims(&self) -> Vec<&str> {
        self.dimensions()
            .filter(|d| *d != PODS && self.get(d) >= EPSILON)
            .collect()
    }
}

/// Reads like `kubectl describe`: `cpu 16, memory 32Gi, nvidia.com/gpu 2`; zero dimensions
/// (other than cpu) and the `pods` slot are left out.
impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cpu = if self.milli_cpu % 1000.0 == 0.0 {
            format!("{}", self.milli_cpu / 1000.0)
        } else {
            format!("{:.0}m", self.milli_cpu)
        };
        write!(f, "cpu {cpu}")?;
        if self.memory >= EPSILON {
            write!(f, ", memory {}", human_bytes(self.memory))?;
        }
        for (k, v) in &self.scalars {
            if k != PODS && *v >= EPSILON {
                write!(f, ", {k} {}", v / 1000.0)?;
            }
        }
        Ok(())
    }
}

fn human_bytes(b: f64) -> String {
    const UNITS: [(&str, f64); 4] = [
        ("Ti", 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Ki", 1024.0),
    ];
    for (unit, size) in UNITS {
        if b >= size {
            let v = b / size;
            return if v.fract() == 0.0 {
                format!("{v}{unit}")
            } else {
                format!("{v:.1}{unit}")
            };
        }
    }
    format!("{b:.0}")
}

fn container_requests(c: &Container) -> Resource {
    c.resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .map(Resource::from_list)
        .unwrap_or_default()
}

/// What a pod asks of its node, as the kubelet admits it: the larger of (regular containers
/// plus sidecars) and (each init container plus the sidecars started before it), plus the
/// runtime overhead, plus one `pods` slot.
pub fn pod_request(pod: &Pod) -> Resource {
    let Some(spec) = pod.spec.as_ref() else {
        return Resource::zero().with_scalar(PODS, 1000.0);
    };
    let mut regular = Resource::zero();
    for c in &spec.containers {
        regular.add(&container_requests(c));
    }
    let mut sidecars = Resource::zero();
    let mut init_peak = Resource::zero();
    for c in spec.init_containers.iter().flatten() {
        let req = container_requests(c);
        if c.restart_policy.as_deref() == Some("Always") {
            sidecars.add(&req);
            init_peak = init_peak.max_with(&sidecars);
        } else {
            init_peak = init_peak.max_with(&req.plus(&sidecars));
        }
    }
    regular.add(&sidecars);
    let mut total = regular.max_with(&init_peak);
    if let Some(overhead) = &spec.overhead {
        total.add(&Resource::from_list(overhead));
    }
    total.scalars.insert(PODS.into(), 1000.0);
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn reads_lists_and_skips_quota_keys() {
        let list: BTreeMap<String, Quantity> = [
            ("cpu", "1500m"),
            ("memory", "1Gi"),
            ("nvidia.com/gpu", "2"),
            ("count/pods", "4"),
            ("requests.cpu", "4"),
            ("pods", "110"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect();
        let r = Resource::from_list(&list);
        assert_eq!(r.milli_cpu, 1500.0);
        assert_eq!(r.memory, 1024.0 * 1024.0 * 1024.0);
        assert_eq!(r.get("nvidia.com/gpu"), 2000.0);
        assert_eq!(r.get("pods"), 110_000.0);
        assert!(!r.scalars.contains_key("count/pods"));
        assert!(!r.scalars.contains_key("requests.cpu"));
    }

    #[test]
    fn comparisons_use_epsilon_and_missing_scalars_are_zero() {
        let a = Resource::new(100.0, 0.0);
        let b = Resource::new(100.05, 0.0);
        assert!(b.less_equal(&a));
        let gpu = Resource::zero().with_scalar("nvidia.com/gpu", 1000.0);
        assert!(!gpu.less_equal(&Resource::new(8000.0, 1e9)));
        assert!(
            Resource::new(8000.0, 1e9)
                .less_equal(&Resource::new(8000.0, 1e9).with_scalar("x", 1.0))
        );
        // Only the dimensions the request has are compared.
        let req = Resource::new(1000.0, 0.0);
        assert!(Resource::new(500.0, 9e9).less_equal_in(&Resource::new(1000.0, 1.0), &req));
        assert_eq!(
            gpu.first_exceeding(&Resource::zero()).as_deref(),
            Some("nvidia.com/gpu")
        );
    }

    #[test]
    fn empty_ignores_pods() {
        assert!(Resource::zero().with_scalar(PODS, 1000.0).is_empty());
        assert!(!Resource::new(1.0, 0.0).is_empty());
    }

    #[test]
    fn pod_request_counts_init_sidecars_and_overhead() {
        let p = pod(json!({
            "metadata": {"name": "p"},
            "spec": {
                "containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                    {"name": "b", "resources": {"requests": {"cpu": "500m"}}}
                ],
                "initContainers": [
                    {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "250m"}}},
                    {"name": "big-init", "resources": {"requests": {"cpu": "3", "nvidia.com/gpu": "1"}}}
                ],
                "overhead": {"cpu": "100m"}
            }
        }));
        let r = pod_request(&p);
        // init peak: 3 cpu + 250m sidecar = 3250m > 1500m + 250m; plus 100m overhead.
        assert_eq!(r.milli_cpu, 3350.0);
        assert_eq!(r.memory, 1024.0 * 1024.0 * 1024.0);
        assert_eq!(r.get("nvidia.com/gpu"), 1000.0);
        assert_eq!(r.get(PODS), 1000.0);
    }

    #[test]
    fn reads_like_kubectl() {
        let r = Resource::new(16000.0, 32.0 * 1024.0 * 1024.0 * 1024.0)
            .with_scalar("nvidia.com/gpu", 2000.0)
            .with_scalar(PODS, 4000.0);
        assert_eq!(r.to_string(), "cpu 16, memory 32Gi, nvidia.com/gpu 2");
        assert_eq!(Resource::new(1500.0, 0.0).to_string(), "cpu 1500m");
        let only = Resource::new(1.0, 5.0)
            .with_scalar("x", 7.0)
            .only_dims_of(&Resource::new(1.0, 0.0));
        assert_eq!(only, Resource::new(1.0, 0.0));
    }

    #[test]
    fn sub_never_goes_negative_and_share() {
        let mut a = Resource::new(100.0, 10.0);
        a.sub(&Resource::new(200.0, 5.0));
        assert_eq!(a, Resource::new(0.0, 5.0));
        assert_eq!(share(0.0, 0.0), 0.0);
        assert_eq!(share(1.0, 0.0), 1.0);
        assert_eq!(
            Resource::new(500.0, 10.0).share_of(&Resource::new(1000.0, 100.0)),
            0.5
        );
    }

    #[test]
    fn first_exceeding_free_is_first_exceeding_of_the_difference() {
        let alloc = Resource::new(4000.0, 8e9).with_scalar("gpu", 2000.0);
        let used = Resource::new(3000.0, 1e9)
            .with_scalar("gpu", 2000.0)
            .with_scalar("x", 5.0);
        for want in [
            Resource::new(1000.0, 1e9),
            Resource::new(1001.0, 1e9),
            Resource::new(500.0, 8e9),
            Resource::new(0.0, 0.0).with_scalar("gpu", 1.0),
            Resource::new(0.0, 0.0).with_scalar("x", 1.0),
            Resource::new(0.0, 0.0).with_scalar("y", 0.0),
        ] {
            assert_eq!(
                want.first_exceeding_free(&alloc, &used).map(str::to_string),
                want.first_exceeding(&alloc.minus(&used)),
                "{want:?}"
            );
        }
    }
}
