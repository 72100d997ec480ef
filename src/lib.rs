//! # tephra
//!
//! Volcano-style batch scheduling (gang scheduling, queues, job lifecycle policies) for any
//! Kubernetes cluster, as one binary. The picture:
//!
//! ```text
//!             kube-apiserver (or the embedded API)                   kube-scheduler
//!    watch/list │   ▲ create/patch/bind            AdmissionReview │        │ extender JSON
//!               ▼   │                                              ▼        ▼
//!    ┌──────────────────────────── tephra serve ───────────────────────────────┐
//!    │ cluster/    the kube client and the shared watch caches                  │
//!    │    ├──▶ admission/  pure: (review, cluster view) → allow / deny / patch  │
//!    │    ├──▶ controllers/  vcJobs, PodGroups for plain workloads, Queue state  │
//!    │    ├──▶ scheduler/  the gang session: the placement plan, PodGroup status │
//!    │    └──▶ extender/  kube-scheduler's filter, prioritize, bind, preempt     │
//!    │ server/     axum over rustls: routes, limits, health, /metrics           │
//!    │ metrics     one Prometheus registry                                       │
//!    └──────────────────────────────────────────────────────────────────────────┘
//!    crates/apiserver  in-memory Kubernetes-compatible API (the tephra-apiserver crate)
//!    sim_scheduler     the kube-scheduler stand-in of embedded mode (a kube client)
//! ```
//!
//! `main.rs` is a thin shell over [`cli`]; everything testable lives in this library.
#![forbid(unsafe_code)]

/// mimalloc for every binary built on this library (`tephra`, the tests, the benches). Every
/// answer tephra gives allocates many short-lived strings and JSON values on two or three
/// threads; a profile of the embedded system binding 4,000 gang pods spent about a quarter of
/// its CPU in glibc's malloc and free (consolidation and chunk unlinking), which mimalloc's
/// per-thread free lists avoid.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod admission;
pub mod app;
pub mod certs;
pub mod cli;
pub mod cluster;
pub mod controllers;
pub mod extender;
pub mod leader;
pub mod metrics;
pub mod scheduler;
pub mod selftls;
pub mod server;
pub mod sim_scheduler;
pub mod vcctl;

/// One-line error reports (the `tephra-report` crate, shared with the embedded API).
pub use tephra_api as api;
pub use tephra_report as report;
