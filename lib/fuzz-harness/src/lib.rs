//! # sextant-fuzz-harness
//!
//! Entry points for fuzzing (a development crate: nothing deployed depends on it). Each
//! takes arbitrary bytes and checks what a client or an operator relies on: no panic, no
//! hang, and for the HTTP paths no server error: every answer is a success or a 4xx in the
//! error envelope.
//!
//! `fuzz/` runs them under libFuzzer (`cargo fuzz`, coverage-guided, for long runs) and
//! `tests/fuzz_bounded.rs` runs them on seed inputs and random mutations in every CI run.
//! A violation panics with the offending input, which is what both runners report.

#![warn(missing_docs)]

mod harness;
mod targets;

pub use harness::{harness, Harness, KEY, ROUTES};
pub use targets::{apigw_event, index_file, pdf, request_body, rewrite, search_filters};
