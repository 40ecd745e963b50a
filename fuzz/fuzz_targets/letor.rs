//! The target `letor`: [`rankd_fuzz::targets::letor`] under libFuzzer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rankd_fuzz::targets::letor(data));
