#![no_main]
//! `sextant_fuzz_harness::apigw_event` under libFuzzer.
libfuzzer_sys::fuzz_target!(|data: &[u8]| sextant_fuzz_harness::apigw_event(data));
