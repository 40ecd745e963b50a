//! The target `model`: [`rankd_fuzz::targets::model`] under libFuzzer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rankd_fuzz::targets::model(data));
