//! The target `html`: [`rankd_fuzz::targets::html`] under libFuzzer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rankd_fuzz::targets::html(data));
