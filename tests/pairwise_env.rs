//! `RANKD_SIMD` overrides the detected instruction set.
//!
//! A test binary of its own, not a module of `tests/tests.rs` (one process, one test): the
//! test sets a process-wide environment variable, and the instruction set is chosen once per
//! process, so any other test in the process could race the `set_var` or make the choice first.

use rankd::pairwise::Isa;

#[test]
fn rankd_simd_env_var_selects_the_path() {
    // Set before anything reads it; the only test in this process, so no other thread races.
    std::env::set_var("RANKD_SIMD", "scalar");
    assert_eq!(Isa::active(), Isa::Scalar);
}
