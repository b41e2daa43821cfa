#![no_main]
//! `sextant::api::fuzz::search_filters` under libFuzzer.
libfuzzer_sys::fuzz_target!(|data: &[u8]| sextant::api::fuzz::search_filters(data));
