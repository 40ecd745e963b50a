//! AVX2 + FMA (8 f32 lanes). The kernels are `generic.rs`'s on this [`Vector`], fused
//! multiply-adds where SSE rounds twice; scoring alone never fuses, which keeps it bit-for-bit
//! equal to the scalar twin.
//!
//! Each public function checks the CPU once (a cached atomic load) and then calls a
//! `#[target_feature]` function; that check is what makes the `unsafe` calls sound even if a
//! caller bypasses the dispatcher in `mod.rs`.

use std::arch::x86_64::*;

use super::generic;
use super::loss::Loss;
use super::vector::Vector;
use super::PairCount;

const LANES: usize = 8;

fn assert_supported() {
    assert!(
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"),
        "the AVX2 pairwise path needs AVX2 and FMA"
    );
}

pub(super) fn score_block(x: &[f32], d: usize, w: &[f32], out: &mut [f32]) {
    assert_supported();
    // SAFETY: the CPU supports AVX2 and FMA (asserted above).
    unsafe { score_block_avx2(x, d, w, out) }
}

/// Four rows at a time, so each pair of `w` loads feeds eight multiply-adds; each row keeps
/// its 16 partial sums in two registers.
#[target_feature(enable = "avx2,fma")]
fn score_block_avx2(x: &[f32], d: usize, w: &[f32], out: &mut [f32]) {
    // SAFETY: this function runs only with AVX2 and FMA enabled.
    unsafe { generic::score_block::<__m256, 4>(x, d, w, out) }
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
    // SAFETY: the CPU supports AVX2 and FMA (asserted above).
    unsafe { pair_loss_grad_avx2(pos, neg, v, loss, grad_pos, grad_neg) }
}

#[target_feature(enable = "avx2,fma")]
fn pair_loss_grad_avx2(
    pos: &[f32],
    neg: &[f32],
    v: &[f32],
    loss: Loss,
    grad_pos: &mut [f64],
    grad_neg: &mut [f64],
) -> f64 {
    // SAFETY: this function runs only with AVX2 and FMA enabled.
    unsafe { generic::pair_loss_grad::<__m256>(pos, neg, v, loss, grad_pos, grad_neg) }
}

pub(super) fn pair_counts(pos: &[f32], neg: &[f32], per_positive: &mut [PairCount]) {
    assert_supported();
    // SAFETY: the CPU supports AVX2 and FMA (asserted above).
    unsafe { pair_counts_avx2(pos, neg, per_positive) }
}

#[target_feature(enable = "avx2,fma")]
fn pair_counts_avx2(pos: &[f32], neg: &[f32], per_positive: &mut [PairCount]) {
    // SAFETY: this function runs only with AVX2 and FMA enabled.
    unsafe { generic::pair_counts::<__m256>(pos, neg, per_positive) }
}

#[inline(always)]
unsafe fn lane_mask(m: usize) -> __m256i {
    let index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_cmpgt_epi32(_mm256_set1_epi32(m as i32), index)
}

impl Vector for __m256 {
    const LANES: usize = LANES;
    type Counts = __m256i;

    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        _mm256_set1_ps(x)
    }
    #[inline(always)]
    unsafe fn zero() -> Self {
        _mm256_setzero_ps()
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        _mm256_loadu_ps(p)
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        _mm256_storeu_ps(p, self)
    }
    #[inline(always)]
    unsafe fn load_prefix(values: &[f32]) -> Self {
        // maskload reads only the lanes whose mask is set: the slice's elements.
        _mm256_maskload_ps(values.as_ptr(), lane_mask(values.len().min(LANES)))
    }
    #[inline(always)]
    unsafe fn add(self, b: Self) -> Self {
        _mm256_add_ps(self, b)
    }
    #[inline(always)]
    unsafe fn sub(self, b: Self) -> Self {
        _mm256_sub_ps(self, b)
    }
    #[inline(always)]
    unsafe fn mul(self, b: Self) -> Self {
        _mm256_mul_ps(self, b)
    }
    #[inline(always)]
    unsafe fn div(self, b: Self) -> Self {
        _mm256_div_ps(self, b)
    }
    #[inline(always)]
    unsafe fn max(self, b: Self) -> Self {
        _mm256_max_ps(self, b)
    }
    #[inline(always)]
    unsafe fn min(self, b: Self) -> Self {
        _mm256_min_ps(self, b)
    }
    #[inline(always)]
    unsafe fn mul_add(self, b: Self, c: Self) -> Self {
        _mm256_fmadd_ps(self, b, c)
    }
    #[inline(always)]
    unsafe fn neg_mul_add(self, b: Self, c: Self) -> Self {
        _mm256_fnmadd_ps(self, b, c)
    }
    #[inline(always)]
    unsafe fn abs(self) -> Self {
        _mm256_andnot_ps(_mm256_set1_ps(-0.0), self)
    }
    #[inline(always)]
    unsafe fn round(self) -> Self {
        _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(self)
    }
    #[inline(always)]
    unsafe fn ldexp(self, n: Self) -> Self {
        /// `2^k` for `−126 ≤ k ≤ 127`, built from the exponent bits.
        #[inline(always)]
        unsafe fn pow2(k: __m256i) -> __m256 {
            _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(
                k,
                _mm256_set1_epi32(127),
            )))
        }
        let n = _mm256_cvtps_epi32(n);
        let half = _mm256_srai_epi32::<1>(n);
        _mm256_mul_ps(
            _mm256_mul_ps(self, pow2(half)),
            pow2(_mm256_sub_epi32(n, half)),
        )
    }
    #[inline(always)]
    unsafe fn lt(self, b: Self) -> Self {
        _mm256_cmp_ps::<_CMP_LT_OQ>(self, b)
    }
    #[inline(always)]
    unsafe fn eq(self, b: Self) -> Self {
        _mm256_cmp_ps::<_CMP_EQ_OQ>(self, b)
    }
    #[inline(always)]
    unsafe fn ge(self, b: Self) -> Self {
        _mm256_cmp_ps::<_CMP_GE_OQ>(self, b)
    }
    #[inline(always)]
    unsafe fn first_lanes(m: usize) -> Self {
        _mm256_castsi256_ps(lane_mask(m))
    }
    #[inline(always)]
    unsafe fn and(self, mask: Self) -> Self {
        _mm256_and_ps(self, mask)
    }
    #[inline(always)]
    unsafe fn blend(self, if_true: Self, mask: Self) -> Self {
        _mm256_blendv_ps(self, if_true, mask)
    }
    #[inline(always)]
    unsafe fn counts_zero() -> __m256i {
        _mm256_setzero_si256()
    }
    #[inline(always)]
    unsafe fn count(counts: __m256i, mask: Self) -> __m256i {
        _mm256_sub_epi32(counts, _mm256_castps_si256(mask))
    }
    #[inline(always)]
    unsafe fn counts_total(counts: __m256i) -> u64 {
        let mut lanes = [0i32; LANES];
        _mm256_storeu_si256(lanes.as_mut_ptr().cast(), counts);
        lanes.iter().map(|&c| c as u32 as u64).sum()
    }
    #[inline(always)]
    unsafe fn quads(self) -> __m128 {
        _mm_add_ps(
            _mm256_castps256_ps128(self),
            _mm256_extractf128_ps::<1>(self),
        )
    }
    #[inline(always)]
    unsafe fn row_quads([lo, hi, ..]: &[Self; 4]) -> __m128 {
        // Partials l (in `lo`) and l+8 (in `hi`), then lanes m and m+4.
        _mm256_add_ps(*lo, *hi).quads()
    }
}

// ---------------------------------------------------------------------------------------
// Peak FMA throughput probe
// ---------------------------------------------------------------------------------------

/// Ten independent FMA chains (enough to cover latency × pipes on current x86 cores),
/// registers only; best of five runs of 2·10⁸ FMA instructions.
pub(super) fn peak_fma_gflops() -> f64 {
    assert_supported();
    const CHAINS: u64 = 10;
    let iters: u64 = 20_000_000;
    let mut best = 0.0f64;
    for _ in 0..5 {
        let start = std::time::Instant::now();
        // SAFETY: the CPU supports AVX2 and FMA (asserted above).
        let sink = unsafe { fma_chains(std::hint::black_box(iters)) };
        let secs = start.elapsed().as_secs_f64();
        std::hint::black_box(sink);
        let flops = (iters * CHAINS * LANES as u64 * 2) as f64;
        best = best.max(flops / secs / 1e9);
    }
    best
}

/// Best-of-`reps` read throughput in GB/s of streaming `block` once per pass with 256-bit
/// loads into eight register accumulators (no arithmetic to wait on): the fastest any kernel
/// that reads each element once, as `X·w` does, can take the block in from wherever it lives.
pub(super) fn read_gbs(block: &[f32], reps: usize) -> f64 {
    assert_supported();
    let passes = (64 << 20) / (block.len() * 4).max(1) + 1;
    let mut best = 0.0f64;
    for _ in 0..reps {
        let start = std::time::Instant::now();
        for _ in 0..passes {
            // SAFETY: the CPU supports AVX2 and FMA (asserted above).
            std::hint::black_box(unsafe { stream_sum(std::hint::black_box(block)) });
        }
        let secs = start.elapsed().as_secs_f64();
        best = best.max((passes * block.len() * 4) as f64 / secs / 1e9);
    }
    best
}

#[target_feature(enable = "avx2,fma")]
fn stream_sum(block: &[f32]) -> f32 {
    const UNROLL: usize = 8;
    let mut acc = [_mm256_setzero_ps(); UNROLL];
    let full = block.len() - block.len() % (UNROLL * LANES);
    let p = block.as_ptr();
    let mut i = 0;
    while i < full {
        for (j, a) in acc.iter_mut().enumerate() {
            // SAFETY: i + UNROLL·LANES <= full <= block.len().
            *a = _mm256_add_ps(*a, unsafe { _mm256_loadu_ps(p.add(i + j * LANES)) });
        }
        i += UNROLL * LANES;
    }
    let sum = acc
        .iter()
        .fold(_mm256_setzero_ps(), |s, &c| _mm256_add_ps(s, c));
    // SAFETY: this function runs only with AVX2 and FMA enabled.
    let vectors = unsafe { sum.sum() };
    vectors + block[full..].iter().sum::<f32>()
}

#[target_feature(enable = "avx2,fma")]
fn fma_chains(iters: u64) -> f32 {
    let a = _mm256_set1_ps(std::hint::black_box(0.999_999));
    let b = _mm256_set1_ps(std::hint::black_box(1e-7));
    let mut acc = [_mm256_set1_ps(1.0); 10];
    for _ in 0..iters {
        for c in acc.iter_mut() {
            *c = _mm256_fmadd_ps(*c, a, b);
        }
    }
    let sum = acc
        .iter()
        .fold(_mm256_setzero_ps(), |s, &c| _mm256_add_ps(s, c));
    // SAFETY: this function runs only with AVX2 and FMA enabled.
    unsafe { sum.sum() }
}

#[cfg(test)]
mod tests {
    use super::super::Isa;
    use super::*;
    use crate::pairwise::generic::{exp_neg, log1p_unit};

    fn exp_neg_lanes(a: [f32; LANES]) -> [f32; LANES] {
        let mut out = [0.0f32; LANES];
        // SAFETY: tests only call this after checking AVX2 + FMA; arrays hold eight f32.
        unsafe { exp_neg(__m256::load(a.as_ptr())).store(out.as_mut_ptr()) };
        out
    }

    fn log1p_lanes(e: [f32; LANES]) -> [f32; LANES] {
        let mut out = [0.0f32; LANES];
        // SAFETY: as above.
        unsafe { log1p_unit(__m256::load(e.as_ptr())).store(out.as_mut_ptr()) };
        out
    }

    fn ulps(got: f32, want: f64) -> f64 {
        let want32 = want as f32;
        let ulp = (f32::from_bits(want32.abs().to_bits() + 1) - want32.abs()) as f64;
        (got as f64 - want).abs() / ulp
    }

    /// The vector exp against f64 `exp` on a dense grid of [0, 104]: ≤ 2 ulp on normal
    /// results, ≤ 1 subnormal step below them.
    #[test]
    fn exp_neg_is_within_two_ulp() {
        if !Isa::Avx2.is_available() {
            eprintln!("skipping: this CPU has no AVX2 + FMA");
            return;
        }
        let mut worst = 0.0f64;
        for step in 0..(104 * 4096) / LANES {
            let a: [f32; LANES] = std::array::from_fn(|l| ((step * LANES + l) as f32) / 4096.0);
            let got = exp_neg_lanes(a);
            for l in 0..LANES {
                let want = (-(a[l] as f64)).exp();
                if want >= f32::MIN_POSITIVE as f64 {
                    worst = worst.max(ulps(got[l], want));
                } else {
                    assert!((got[l] as f64 - want).abs() <= 1.5e-45, "a = {}", a[l]);
                }
            }
        }
        assert!(worst <= 2.0, "worst error {worst} ulp");
        assert_eq!(exp_neg_lanes([f32::INFINITY; LANES]), [0.0; LANES]);
    }

    /// The atanh-series log1p against f64 `ln_1p` on [0, 1], including tiny arguments.
    #[test]
    fn log1p_unit_is_within_three_ulp() {
        if !Isa::Avx2.is_available() {
            eprintln!("skipping: this CPU has no AVX2 + FMA");
            return;
        }
        let mut worst = 0.0f64;
        let grid = (0..=65536)
            .map(|k| k as f32 / 65536.0)
            .chain([1e-30, 1e-10, 3e-8]);
        let grid: Vec<f32> = grid.collect();
        for chunk in grid.chunks(LANES) {
            let mut e = [0.0f32; LANES];
            e[..chunk.len()].copy_from_slice(chunk);
            let got = log1p_lanes(e);
            for l in 0..chunk.len() {
                let want = (e[l] as f64).ln_1p();
                if want > 0.0 {
                    worst = worst.max(ulps(got[l], want));
                } else {
                    assert_eq!(got[l], 0.0);
                }
            }
        }
        assert!(worst <= 3.0, "worst error {worst} ulp");
    }
}
