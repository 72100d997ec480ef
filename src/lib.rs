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
//!    │    ├──▶ controllers/  PodGroups for plain workloads, Queue state          │
//!    │    └──▶ (the scheduler extender: a later module)                       │
//!    │ server/     axum over rustls: routes, limits, health, /metrics           │
//!    │ metrics     one Prometheus registry                                       │
//!    └──────────────────────────────────────────────────────────────────────────┘
//!    embedded/    in-memory Kubernetes-compatible API
//! ```
//!
//! `main.rs` is a thin shell over [`cli`]; everything testable lives in this library.
#![forbid(unsafe_code)]

pub mod admission;
pub mod api;
pub mod app;
pub mod certs;
pub mod cli;
pub mod cluster;
pub mod controllers;
pub mod embedded;
pub mod extender;
pub mod leader;
pub mod metrics;
pub mod report;
pub mod scheduler;
pub mod server;
