//! The integration tests of the embedded API, one binary (each links the whole crate).

mod safety;
mod status_answers;
mod tables;
