//! The target `trec`: [`rankd_fuzz::targets::trec`] under libFuzzer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rankd_fuzz::targets::trec(data));
