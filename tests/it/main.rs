//! The integration tests, one binary: each module was its own test crate, and every test
//! binary links all of tephra (about 100 MB in a debug build), so one binary builds and links
//! once and keeps `cargo test` within the disk of a small CI machine.
//! Run one module with `cargo test --test it <module>::`.

mod common;

mod admission_https;
mod admission_webhooks;
mod api_types;
mod cli;
mod cronjob_embedded;
mod e2e_embedded;
mod embedded_conformance;
mod embedded_schema;
mod eviction_embedded;
mod extender_embedded;
mod extender_protocol;
mod frameworks;
mod install_files;
mod job_controller;
mod leader_election;
mod metrics_embedded;
mod podgroup_controller;
mod pure_crates;
mod reference_docs;
mod scheduler_embedded;
mod scheduler_properties;
mod server_https;
mod simulate;
mod simulate_accuracy;
mod stand_in_default_profile;
mod startup;
mod tls_self;
mod topology_embedded;
mod webview;
