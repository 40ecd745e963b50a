//! The target `html_nesting`: [`rankd_fuzz::targets::html_nesting`] under libFuzzer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rankd_fuzz::targets::html_nesting(data));
