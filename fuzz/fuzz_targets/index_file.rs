#![no_main]
//! `sextant::api::fuzz::index_file` under libFuzzer.
libfuzzer_sys::fuzz_target!(|data: &[u8]| sextant::api::fuzz::index_file(data));
