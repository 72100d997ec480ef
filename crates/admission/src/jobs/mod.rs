//! `/jobs/mutate` and `/jobs/validate`: Volcano's vcJob defaults and checks.

pub mod mutate;
pub mod validate;
