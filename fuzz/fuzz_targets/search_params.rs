//! The target `search_params`: [`rankd_fuzz::targets::search_params`] under libFuzzer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rankd_fuzz::targets::search_params(data));
