//! SSE4.1 (4 f32 lanes, no FMA): the x86-64 baseline path. The kernels are `generic.rs`'s on
//! this [`Vector`], with multiply + add where AVX2 fuses.
//!
//! Each public function checks the CPU (a cached atomic load) before calling its
//! `#[target_feature]` twin, which makes the `unsafe` calls sound on their own.

use std::arch::x86_64::*;

use super::generic;
use super::loss::Loss;
use super::vector::Vector;
use super::PairCount;

fn assert_supported() {
    assert!(
        is_x86_feature_detected!("sse4.1"),
        "the SSE pairwise path needs SSE4.1"
    );
}

pub(super) fn score_block(x: &[f32], d: usize, w: &[f32], out: &mut [f32]) {
    assert_supported();
    // SAFETY: the CPU supports SSE4.1 (asserted above).
    unsafe { score_block_sse(x, d, w, out) }
}

/// Two rows at a time: 16 partials per row already take four registers each.
#[target_feature(enable = "sse4.1")]
fn score_block_sse(x: &[f32], d: usize, w: &[f32], out: &mut [f32]) {
    // SAFETY: this function runs only with SSE4.1 enabled.
    unsafe { generic::score_block::<__m128, 2>(x, d, w, out) }
}

pub(super) fn pair_loss_grad(
    pos: &[f32],
    neg: &[f32],
    v: &[f32],
    loss: Loss,
    grad_pos: &mut [f64],
    grad_neg: &mut [f64],
) -> f64 {
    assert_supported();
    // SAFETY: the CPU supports SSE4.1 (asserted above).
    unsafe { pair_loss_grad_sse(pos, neg, v, loss, grad_pos, grad_neg) }
}

#[target_feature(enable = "sse4.1")]
fn pair_loss_grad_sse(
    pos: &[f32],
    neg: &[f32],
    v: &[f32],
    loss: Loss,
    grad_pos: &mut [f64],
    grad_neg: &mut [f64],
) -> f64 {
    // SAFETY: this function runs only with SSE4.1 enabled.
    unsafe { generic::pair_loss_grad::<__m128>(pos, neg, v, loss, grad_pos, grad_neg) }
}

pub(super) fn pair_counts(pos: &[f32], neg: &[f32], per_positive: &mut [PairCount]) {
    assert_supported();
    // SAFETY: the CPU supports SSE4.1 (asserted above).
    unsafe { pair_counts_sse(pos, neg, per_positive) }
}

#[target_feature(enable = "sse4.1")]
fn pair_counts_sse(pos: &[f32], neg: &[f32], per_positive: &mut [PairCount]) {
    // SAFETY: this function runs only with SSE4.1 enabled.
    unsafe { generic::pair_counts::<__m128>(pos, neg, per_positive) }
}

impl Vector for __m128 {
    const LANES: usize = 4;
    type Counts = __m128i;

    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        _mm_set1_ps(x)
    }
    #[inline(always)]
    unsafe fn zero() -> Self {
        _mm_setzero_ps()
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        _mm_loadu_ps(p)
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        _mm_storeu_ps(p, self)
    }
    #[inline(always)]
    unsafe fn load_prefix(values: &[f32]) -> Self {
        if values.len() >= 4 {
            _mm_loadu_ps(values.as_ptr())
        } else {
            let mut padded = [0.0f32; 4];
            padded[..values.len()].copy_from_slice(values);
            _mm_loadu_ps(padded.as_ptr())
        }
    }
    #[inline(always)]
    unsafe fn add(self, b: Self) -> Self {
        _mm_add_ps(self, b)
    }
    #[inline(always)]
    unsafe fn sub(self, b: Self) -> Self {
        _mm_sub_ps(self, b)
    }
    #[inline(always)]
    unsafe fn mul(self, b: Self) -> Self {
        _mm_mul_ps(self, b)
    }
    #[inline(always)]
    unsafe fn div(self, b: Self) -> Self {
        _mm_div_ps(self, b)
    }
    #[inline(always)]
    unsafe fn max(self, b: Self) -> Self {
        _mm_max_ps(self, b)
    }
    #[inline(always)]
    unsafe fn min(self, b: Self) -> Self {
        _mm_min_ps(self, b)
    }
    #[inline(always)]
    unsafe fn mul_add(self, b: Self, c: Self) -> Self {
        _mm_add_ps(_mm_mul_ps(self, b), c)
    }
    #[inline(always)]
    unsafe fn neg_mul_add(self, b: Self, c: Self) -> Self {
        _mm_sub_ps(c, _mm_mul_ps(self, b))
    }
    #[inline(always)]
    unsafe fn abs(self) -> Self {
        _mm_andnot_ps(_mm_set1_ps(-0.0), self)
    }
    #[inline(always)]
    unsafe fn round(self) -> Self {
        _mm_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(self)
    }
    #[inline(always)]
    unsafe fn ldexp(self, n: Self) -> Self {
        /// `2^k` for `−126 ≤ k ≤ 127`, built from the exponent bits.
        #[inline(always)]
        unsafe fn pow2(k: __m128i) -> __m128 {
            _mm_castsi128_ps(_mm_slli_epi32::<23>(_mm_add_epi32(k, _mm_set1_epi32(127))))
        }
        let n = _mm_cvtps_epi32(n);
        let half = _mm_srai_epi32::<1>(n);
        _mm_mul_ps(_mm_mul_ps(self, pow2(half)), pow2(_mm_sub_epi32(n, half)))
    }
    #[inline(always)]
    unsafe fn lt(self, b: Self) -> Self {
        _mm_cmplt_ps(self, b)
    }
    #[inline(always)]
    unsafe fn eq(self, b: Self) -> Self {
        _mm_cmpeq_ps(self, b)
    }
    #[inline(always)]
    unsafe fn ge(self, b: Self) -> Self {
        _mm_cmpge_ps(self, b)
    }
    #[inline(always)]
    unsafe fn first_lanes(m: usize) -> Self {
        let index = _mm_setr_epi32(0, 1, 2, 3);
        _mm_castsi128_ps(_mm_cmpgt_epi32(_mm_set1_epi32(m as i32), index))
    }
    #[inline(always)]
    unsafe fn and(self, mask: Self) -> Self {
        _mm_and_ps(self, mask)
    }
    #[inline(always)]
    unsafe fn blend(self, if_true: Self, mask: Self) -> Self {
        _mm_blendv_ps(self, if_true, mask)
    }
    #[inline(always)]
    unsafe fn counts_zero() -> __m128i {
        _mm_setzero_si128()
    }
    #[inline(always)]
    unsafe fn count(counts: __m128i, mask: Self) -> __m128i {
        _mm_sub_epi32(counts, _mm_castps_si128(mask))
    }
    #[inline(always)]
    unsafe fn counts_total(counts: __m128i) -> u64 {
        let mut lanes = [0i32; 4];
        _mm_storeu_si128(lanes.as_mut_ptr().cast(), counts);
        lanes.iter().map(|&c| c as u32 as u64).sum()
    }
    #[inline(always)]
    unsafe fn quads(self) -> __m128 {
        self
    }
    #[inline(always)]
    unsafe fn row_quads([p0, p1, p2, p3]: &[Self; 4]) -> __m128 {
        // Partials l and l+8 are registers q and q+2; then m and m+4 are the two sums.
        _mm_add_ps(_mm_add_ps(*p0, *p2), _mm_add_ps(*p1, *p3))
    }
}
