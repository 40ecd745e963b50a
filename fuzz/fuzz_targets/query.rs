//! The target `query`: [`rankd_fuzz::targets::query`] under libFuzzer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rankd_fuzz::targets::query(data));
