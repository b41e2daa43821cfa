#![no_main]
//! `sextant_fuzz_harness::request_body` under libFuzzer.
libfuzzer_sys::fuzz_target!(|data: &[u8]| sextant_fuzz_harness::request_body(data));
