#![no_main]
//! `sextant::api::fuzz::rewrite` under libFuzzer.
libfuzzer_sys::fuzz_target!(|data: &[u8]| sextant::api::fuzz::rewrite(data));
