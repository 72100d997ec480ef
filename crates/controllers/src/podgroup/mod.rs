//! The PodGroup of a plain workload's gang.
//!
//! * [`build`]: the PodGroup a pod and its owners call for, and update detection.
//! * [`resources`]: pod requests as Kubernetes counts them and `minResources`.

pub mod build;
pub mod resources;
