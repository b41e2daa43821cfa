#![no_main]
//! `sextant_fuzz_harness::search_filters` under libFuzzer.
libfuzzer_sys::fuzz_target!(|data: &[u8]| sextant_fuzz_harness::search_filters(data));
