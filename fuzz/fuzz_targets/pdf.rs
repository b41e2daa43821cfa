#![no_main]
//! `sextant_fuzz_harness::pdf` under libFuzzer.
libfuzzer_sys::fuzz_target!(|data: &[u8]| sextant_fuzz_harness::pdf(data));
