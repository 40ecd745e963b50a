//! `RANKD_SIMD` overrides the detected instruction set. Its own test binary (one process, one
//! test) because the choice is made once per process.

use rankd::pairwise::Isa;

#[test]
fn rankd_simd_env_var_selects_the_path() {
    // Set before anything reads it; the only test in this process, so no other thread races.
    std::env::set_var("RANKD_SIMD", "scalar");
    assert_eq!(Isa::active(), Isa::Scalar);
}
