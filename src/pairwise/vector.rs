//! The vector widths the x86-64 kernels are written over (after memchr's `arch/generic`): the
//! algorithms live once in `generic.rs`, over a [`Vector`] of f32 lanes; `sse.rs` implements it
//! for SSE4.1's 4 lanes, `avx2.rs` for AVX2 + FMA's 8, and each runs the algorithms from its
//! own `#[target_feature]` functions, into which everything here inlines.
//!
//! Also here: the two 128-bit horizontal sums both widths end with, so that scoring reduces
//! every row in the one canonical order of `scalar::reduce_partials`.

use std::arch::x86_64::*;

/// One register of f32 lanes and the operations the kernels need of it.
///
/// # Safety
///
/// Every method may execute instructions of the implementation's instruction set: call them
/// only where the CPU supports it. The kernels call them from `#[target_feature]` functions
/// that are reached only after that check (`sse.rs`, `avx2.rs`).
pub(super) trait Vector: Copy {
    /// f32 lanes per register.
    const LANES: usize;
    /// Integer lanes counting compare results ([`Vector::count`]).
    type Counts: Copy;

    unsafe fn splat(x: f32) -> Self;
    unsafe fn zero() -> Self;
    /// Loads `LANES` values from `p` (any alignment).
    unsafe fn load(p: *const f32) -> Self;
    /// Stores `LANES` values at `p` (any alignment).
    unsafe fn store(self, p: *mut f32);
    /// The first `min(values.len(), LANES)` values, +0.0 in the other lanes.
    unsafe fn load_prefix(values: &[f32]) -> Self;

    unsafe fn add(self, b: Self) -> Self;
    unsafe fn sub(self, b: Self) -> Self;
    unsafe fn mul(self, b: Self) -> Self;
    unsafe fn div(self, b: Self) -> Self;
    /// `maxps` semantics: `b` when either is NaN.
    unsafe fn max(self, b: Self) -> Self;
    unsafe fn min(self, b: Self) -> Self;
    /// `self·b + c`: one rounding where the instruction set fuses (AVX2 + FMA), two on SSE.
    unsafe fn mul_add(self, b: Self, c: Self) -> Self;
    /// `c − self·b`, fused or not as [`Vector::mul_add`].
    unsafe fn neg_mul_add(self, b: Self, c: Self) -> Self;
    unsafe fn abs(self) -> Self;
    /// Rounded to the nearest integer (ties to even).
    unsafe fn round(self) -> Self;
    /// `self · 2ⁿ` for integral `n` (`|n| ≤ 252`), applied in two halves so that results down
    /// to the smallest subnormal come out right.
    unsafe fn ldexp(self, n: Self) -> Self;

    /// Lane masks (all ones where true), ordered compares: false where either is NaN.
    unsafe fn lt(self, b: Self) -> Self;
    unsafe fn eq(self, b: Self) -> Self;
    unsafe fn ge(self, b: Self) -> Self;
    /// All ones in the first `m` lanes, zero in the rest.
    unsafe fn first_lanes(m: usize) -> Self;
    unsafe fn and(self, mask: Self) -> Self;
    /// `if_true` where `mask` is set, else `self`.
    unsafe fn blend(self, if_true: Self, mask: Self) -> Self;

    unsafe fn counts_zero() -> Self::Counts;
    /// `counts` plus one in every lane `mask` sets.
    unsafe fn count(counts: Self::Counts, mask: Self) -> Self::Counts;
    unsafe fn counts_total(counts: Self::Counts) -> u64;

    /// Lanes `m` and `m + 4` added (the identity on 4 lanes): the step of the canonical
    /// reduction that brings a register down to 128 bits.
    unsafe fn quads(self) -> __m128;
    /// A row's 16 canonical partial sums (partial `l` in lane `l mod LANES` of register
    /// `l / LANES`, in the first `16 / LANES` registers of `partials`) reduced to its four quad
    /// sums: partials `l` and `l + 8` added, then `m` and `m + 4`.
    unsafe fn row_quads(partials: &[Self; 4]) -> __m128;
    /// The sum of all lanes, in the canonical order.
    #[inline(always)]
    unsafe fn sum(self) -> f32 {
        hsum4(self.quads())
    }
}

/// The last two steps of `scalar::reduce_partials` for one row: `(q0 + q2) + (q1 + q3)`.
#[target_feature(enable = "sse4.1")]
#[inline]
pub(super) fn hsum4(q: __m128) -> f32 {
    let r = _mm_add_ps(q, _mm_movehl_ps(q, q));
    _mm_cvtss_f32(_mm_add_ss(r, _mm_shuffle_ps::<0b01>(r, r)))
}

/// The last two steps of `scalar::reduce_partials` for four rows at once: given each row's
/// quad sums `[q0 q1 q2 q3]`, returns `[(q0+q2)+(q1+q3)]` per row, in row order. The
/// shuffles only move lanes, so every row is summed exactly as [`hsum4`] sums it.
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
