#![no_main]
//! `sextant::api::fuzz::apigw_event` under libFuzzer.
libfuzzer_sys::fuzz_target!(|data: &[u8]| sextant::api::fuzz::apigw_event(data));
