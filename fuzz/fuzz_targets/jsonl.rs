//! The target `jsonl`: [`rankd_fuzz::targets::jsonl`] under libFuzzer.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rankd_fuzz::targets::jsonl(data));
