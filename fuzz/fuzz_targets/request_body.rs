#![no_main]
//! `sextant::api::fuzz::request_body` under libFuzzer.
libfuzzer_sys::fuzz_target!(|data: &[u8]| sextant::api::fuzz::request_body(data));
