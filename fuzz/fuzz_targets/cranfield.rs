//! The target `cranfield`: [`rankd_fuzz::targets::cranfield`] under libFuzzer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rankd_fuzz::targets::cranfield(data));
