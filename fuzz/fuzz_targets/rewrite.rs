#![no_main]
//! `sextant_fuzz_harness::rewrite` under libFuzzer.
libfuzzer_sys::fuzz_target!(|data: &[u8]| sextant_fuzz_harness::rewrite(data));
