//! # tephra
//!
//! Volcano-style batch scheduling (gang scheduling, queues, job lifecycle policies) for any
//! Kubernetes cluster, as one binary. This crate is the binary's edges: everything that talks
//! to a cluster, listens on a socket or runs a task. Every decision it acts on is made in a
//! crate that cannot do either:
//!
//! ```text
//!             kube-apiserver (or the embedded API)                   kube-scheduler
//!    watch/list │   ▲ create/patch/bind            AdmissionReview │        │ extender JSON
//!               ▼   │                                              ▼        ▼
//!    ┌──────────────────────────── tephra serve (this crate) ──────────────────┐
//!    │ cluster/    the kube client, the shared watch caches, start-up          │
//!    │    ├──▶ admission/    HTTP edge of ──▶ tephra-admission  (pure)         │
//!    │    ├──▶ controllers/  reconcile loops ──▶ tephra-controllers (pure)     │
//!    │    ├──▶ scheduler/    runner, status writer ──▶ tephra-scheduler (pure) │
//!    │    └──▶ extender/     filter, prioritize, bind, preempt over the plan   │
//!    │ server/     axum over rustls: routes, limits, health, /metrics          │
//!    │ leader/ selftls/ certs   leader election, certificates                  │
//!    │ cli, vcctl, app          the command line and the staged start          │
//!    └─────────────────────────────────────────────────────────────────────────┘
//!    tephra-api        Volcano's types, keys, CRDs, extender wire types, Events (pure)
//!    tephra-apiserver  the embedded Kubernetes-compatible API and its stand-ins (kubelet,
//!                      kube-scheduler, controller-manager)
//!    tephra-names, tephra-report   name validators; one-line error chains
//! ```
//!
//! A pure crate may depend on other pure crates, k8s-openapi's types and serde, never on a
//! Kubernetes client, an HTTP stack or an async runtime; `tests/it/pure_crates.rs` fails the
//! build's tests if one does. `main.rs` is a thin shell over [`cli`].
#![forbid(unsafe_code)]

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
pub mod simulate;
pub mod sync;
pub mod vcctl;
pub mod webview;

/// Volcano's API types, keys and CRDs (the `tephra-api` crate).
pub use tephra_api as api;
/// One-line error reports (the `tephra-report` crate, shared with the embedded API).
pub use tephra_report as report;
