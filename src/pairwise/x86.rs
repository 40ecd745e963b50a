//! What the SSE4.1 and AVX2 paths share: the constants of the vector `exp` and `log1p`, and
//! the 128-bit reduction of four rows' quad sums that ends block scoring on both.

use std::arch::x86_64::*;

/// The last two steps of `scalar::reduce_partials` for four rows at once: given each row's
/// quad sums `[q0 q1 q2 q3]`, returns `[(q0+q2)+(q1+q3)]` per row, in row order. The
/// shuffles only move lanes, so every row is summed exactly as `sse::hsum4` sums it.
#[target_feature(enable = "sse4.1")]
#[inline]
pub(super) fn reduce_quads([a, b, c, d]: [__m128; 4]) -> __m128 {
    const LOW: i32 = 0b01_00_01_00; // [x0 x1 y0 y1]
    const HIGH: i32 = 0b11_10_11_10; // [x2 x3 y2 y3]
    const EVEN: i32 = 0b10_00_10_00; // [x0 x2 y0 y2]
    const ODD: i32 = 0b11_01_11_01; // [x1 x3 y1 y3]
                                    // [a0+a2, a1+a3, b0+b2, b1+b3] and the same for c, d.
    let ab = _mm_add_ps(_mm_shuffle_ps::<LOW>(a, b), _mm_shuffle_ps::<HIGH>(a, b));
    let cd = _mm_add_ps(_mm_shuffle_ps::<LOW>(c, d), _mm_shuffle_ps::<HIGH>(c, d));
    _mm_add_ps(
        _mm_shuffle_ps::<EVEN>(ab, cd),
        _mm_shuffle_ps::<ODD>(ab, cd),
    )
}

/// Arguments below this give `e^y < 2⁻¹⁵⁰`, which rounds to 0 in f32.
pub(super) const EXP_MIN_ARG: f32 = -104.0;
/// ln 2 split so that `n·LN2_HI` is exact for |n| ≤ 150 (Cephes).
pub(super) const LN2_HI: f32 = 0.693_359_4;
pub(super) const LN2_LO: f32 = -2.121_944_4e-4;
/// Cephes `expf` coefficients, highest first: `e^r ≈ 1 + r + r²·P(r)`.
pub(super) const EXP_POLY: [f32; 6] = [
    1.987_569_1e-4,
    1.398_199_9e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    1.666_666_5e-1,
    0.5, // Cephes prints 5.0000001201e-1, which is 0.5 in f32
];
/// `1/13, 1/11, …, 1/3, 1`: `atanh(s)/s` as a polynomial in s², highest first.
pub(super) const ATANH_SERIES: [f32; 7] = [
    1.0 / 13.0,
    1.0 / 11.0,
    1.0 / 9.0,
    1.0 / 7.0,
    1.0 / 5.0,
    1.0 / 3.0,
    1.0,
];
