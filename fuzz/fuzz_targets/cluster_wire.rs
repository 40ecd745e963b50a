//! The target `cluster_wire`: [`rankd_fuzz::targets::cluster_wire`] under libFuzzer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rankd_fuzz::targets::cluster_wire(data));
