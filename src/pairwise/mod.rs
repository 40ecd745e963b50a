//! The pairwise core: SIMD kernels and their scalar twins (SPEC §7).
