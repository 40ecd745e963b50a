//! The target `admin_bodies`: [`rankd_fuzz::targets::admin_bodies`] under libFuzzer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rankd_fuzz::targets::admin_bodies(data));
