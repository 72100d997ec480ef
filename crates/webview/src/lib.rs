//! The read-only web view, as pure code: what a person wants to see of the batch system
//! (queues with their shares, gangs by queue and why each waits, a gang's pods and their nodes,
//! and what-if answers) built from the API objects the caller holds, and rendered as HTML.
//!
//! ```text
//!  View (objects + the last session's queue figures) ─▶ model ─▶ page structs ─▶ render (HTML)
//! ```
//!
//! The caller (the service's metrics listener) reads its caches and serves the strings; this
//! crate decides what is shown and how. Every value is printed through the templates, which
//! escape it, and nothing a secret could hide in (environment, volumes, annotations other than
//! the scheduling ones, the pasted what-if text aside) is ever read.

#![forbid(unsafe_code)]

mod format;
mod model;
mod pages;

#[cfg(test)]
mod tests;

pub use format::{age, quantity_cpu, quantity_memory};
pub use model::{
    GangPage, GangRow, Overview, PodRow, QueueRow, QueueSection, View, gang_page, overview,
};
pub use pages::{
    PageError, WhatIfAnswer, render_gang, render_not_found, render_overview, render_whatif,
};

/// Where the view is mounted on the listener; every link it prints starts with it.
pub const BASE_PATH: &str = "/ui";
