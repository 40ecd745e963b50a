//! AVX2 + FMA versions of the pairwise kernels (8 f32 lanes). Same results as `scalar.rs`:
//! bit-for-bit for scoring and counts, within the module's stated tolerance for losses.
//!
//! Each public function checks the CPU once (a cached atomic load) and then calls a
//! `#[target_feature]` function; that check is what makes the `unsafe` calls sound even if a
//! caller bypasses the dispatcher in `mod.rs`.

use std::arch::x86_64::*;

use super::loss::Loss;
use super::scalar::PARTIALS;
use super::x86::{reduce_quads, ATANH_SERIES, EXP_MIN_ARG, EXP_POLY, LN2_HI, LN2_LO};
use super::PairCount;

const LANES: usize = 8;
/// Positives whose weighted slopes are summed in f32 before moving to the f64 gradient.
const POS_BLOCK: usize = 64;
/// Negatives per flush of the f32 lane accumulators to f64: two 8-lane accumulators share
/// them, so each lane adds at most 512 / 16 = 32 terms.
const NEG_CHUNK: usize = 512;

const HUBER: u8 = 0;
const LOGISTIC: u8 = 1;
const HINGE: u8 = 2;
const SQUARED_HINGE: u8 = 3;

fn assert_supported() {
    assert!(
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"),
        "the AVX2 pairwise path needs AVX2 and FMA"
    );
}

// ---------------------------------------------------------------------------------------
// Block scoring
// ---------------------------------------------------------------------------------------

pub(super) fn score_block(x: &[f32], d: usize, w: &[f32], out: &mut [f32]) {
    assert_supported();
    // SAFETY: the CPU supports AVX2 and FMA (asserted above).
    unsafe { score_block_avx2(x, d, w, out) }
}

/// Four rows at a time, so each pair of `w` loads feeds eight multiply-adds; each row keeps
/// its 16 canonical partial sums in two registers (`lo` = partials 0–7, `hi` = 8–15). The
/// four rows' sums are reduced together (one transposing shuffle tree, one store) in the
/// canonical order of `scalar::reduce_partials`.
#[target_feature(enable = "avx2,fma")]
fn score_block_avx2(x: &[f32], d: usize, w: &[f32], out: &mut [f32]) {
    if d == 0 {
        out.fill(0.0);
        return;
    }
    let full = d - d % PARTIALS;
    let mut w_tail = [0.0f32; PARTIALS];
    w_tail[..d - full].copy_from_slice(&w[full..]);
    let row = |r: usize| &x[r * d..(r + 1) * d];
    let n = out.len();
    let mut r = 0;
    while r + 4 <= n {
        let [a, b, c, d] = dot_rows(
            [row(r), row(r + 1), row(r + 2), row(r + 3)],
            w,
            full,
            &w_tail,
        );
        let sums = reduce_quads([halves(a), halves(b), halves(c), halves(d)]);
        // SAFETY: r + 4 <= n == out.len().
        unsafe { _mm_storeu_ps(out.as_mut_ptr().add(r), sums) };
        r += 4;
    }
    while r < n {
        out[r] = hsum8(dot_rows([row(r)], w, full, &w_tail)[0]);
        r += 1;
    }
}

#[target_feature(enable = "avx2,fma")]
#[inline]
fn dot_rows<const R: usize>(
    rows: [&[f32]; R],
    w: &[f32],
    full: usize,
    w_tail: &[f32; PARTIALS],
) -> [__m256; R] {
    let mut lo = [_mm256_setzero_ps(); R];
    let mut hi = [_mm256_setzero_ps(); R];
    let mut k = 0;
    while k < full {
        // SAFETY: k + 16 <= full <= d == w.len(); every row also has length d.
        let (w0, w1) = unsafe {
            (
                _mm256_loadu_ps(w.as_ptr().add(k)),
                _mm256_loadu_ps(w.as_ptr().add(k + LANES)),
            )
        };
        for r in 0..R {
            // SAFETY: as above, rows[r].len() == d >= k + 16.
            let (x0, x1) = unsafe {
                (
                    _mm256_loadu_ps(rows[r].as_ptr().add(k)),
                    _mm256_loadu_ps(rows[r].as_ptr().add(k + LANES)),
                )
            };
            lo[r] = _mm256_add_ps(lo[r], _mm256_mul_ps(x0, w0));
            hi[r] = _mm256_add_ps(hi[r], _mm256_mul_ps(x1, w1));
        }
        k += PARTIALS;
    }
    let d = w.len();
    if full < d {
        // The tail lands in partials 0..d-full, exactly as in the scalar order. Masked-off
        // lanes load +0.0 and meet zero padding in `w_tail`, adding +0.0, which leaves every
        // partial unchanged (a partial that starts at +0.0 can never be -0.0).
        let rem = d - full;
        let w0 = load8(&w_tail[..LANES]);
        let w1 = load8(&w_tail[LANES..]);
        let (mask_lo, mask_hi) = (
            lane_mask_i(rem.min(LANES)),
            lane_mask_i(rem.saturating_sub(LANES)),
        );
        for r in 0..R {
            let row = rows[r].as_ptr();
            // SAFETY: maskload reads only the lanes whose mask is set, i.e. elements
            // full..d of a row of length d; the second pointer is formed only when rem > 8,
            // so full + 8 < d and it is in bounds.
            let (x0, x1) = unsafe {
                let x1 = if rem > LANES {
                    _mm256_maskload_ps(row.add(full + LANES), mask_hi)
                } else {
                    _mm256_setzero_ps()
                };
                (_mm256_maskload_ps(row.add(full), mask_lo), x1)
            };
            lo[r] = _mm256_add_ps(lo[r], _mm256_mul_ps(x0, w0));
            hi[r] = _mm256_add_ps(hi[r], _mm256_mul_ps(x1, w1));
        }
    }
    // Partials l and l+8: the first step of the canonical reduction.
    std::array::from_fn(|r| _mm256_add_ps(lo[r], hi[r]))
}

/// Loads the first eight values of a slice.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn load8(values: &[f32]) -> __m256 {
    assert!(values.len() >= LANES);
    // SAFETY: the slice holds at least eight f32 (asserted).
    unsafe { _mm256_loadu_ps(values.as_ptr()) }
}

/// Lanes m and m+4 added: the quad sums of a row whose partials l and l+8 are already added.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn halves(a: __m256) -> __m128 {
    _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps::<1>(a))
}

/// The rest of `scalar::reduce_partials` for one row whose partials l and l+8 are already
/// added: halves, then 0+2 / 1+3, then 0+1.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn hsum8(a: __m256) -> f32 {
    let q = halves(a);
    let r = _mm_add_ps(q, _mm_movehl_ps(q, q));
    _mm_cvtss_f32(_mm_add_ss(r, _mm_shuffle_ps::<0b01>(r, r)))
}

// ---------------------------------------------------------------------------------------
// All-pairs loss and gradient
// ---------------------------------------------------------------------------------------

pub(super) fn pair_loss_grad(
    pos: &[f32],
    neg: &[f32],
    v: &[f32],
    loss: Loss,
    grad_pos: &mut [f64],
    grad_neg: &mut [f64],
) -> f64 {
    assert_supported();
    let kappa = loss.slope_scale();
    // SAFETY (all four arms): the CPU supports AVX2 and FMA (asserted above).
    unsafe {
        match loss {
            Loss::Huber { tau } => {
                all_pairs::<HUBER>(pos, neg, v, 1.0 / tau, kappa, grad_pos, grad_neg)
            }
            Loss::Logistic { sigma } => {
                all_pairs::<LOGISTIC>(pos, neg, v, -sigma, kappa, grad_pos, grad_neg)
            }
            Loss::Hinge { margin } => {
                all_pairs::<HINGE>(pos, neg, v, margin, kappa, grad_pos, grad_neg)
            }
            Loss::SquaredHinge { margin } => {
                all_pairs::<SQUARED_HINGE>(pos, neg, v, margin, kappa, grad_pos, grad_neg)
            }
        }
    }
}

/// The i-outer, j-inner pair loop; `param` is 1/τ, −σ or the margin depending on `LOSS`.
#[target_feature(enable = "avx2,fma")]
fn all_pairs<const LOSS: u8>(
    pos: &[f32],
    neg: &[f32],
    v: &[f32],
    param: f32,
    kappa: f64,
    grad_pos: &mut [f64],
    grad_neg: &mut [f64],
) -> f64 {
    let n = neg.len();
    let k = _mm256_set1_ps(param);
    grad_neg.fill(0.0);
    let mut block_slopes = vec![0.0f32; n];
    let mut total = 0.0f64;
    let mut first = 0;
    while first < pos.len() {
        let last = (first + POS_BLOCK).min(pos.len());
        block_slopes.fill(0.0);
        for i in first..last {
            let vi = v[i];
            if vi == 0.0 {
                grad_pos[i] = 0.0;
                continue;
            }
            let si = _mm256_set1_ps(pos[i]);
            let vv = _mm256_set1_ps(vi);
            let (mut loss_i, mut slope_i) = (0.0f64, 0.0f64);
            let mut chunk = 0;
            while chunk < n {
                let end = (chunk + NEG_CHUNK).min(n);
                let (mut l0, mut l1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
                let (mut g0, mut g1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
                let mut j = chunk;
                while j + 2 * LANES <= end {
                    // SAFETY: j + 16 <= end <= n == neg.len() == block_slopes.len().
                    unsafe {
                        let sn = neg.as_ptr().add(j);
                        let bs = block_slopes.as_mut_ptr().add(j);
                        let (a0, b0) = term::<LOSS>(_mm256_sub_ps(si, _mm256_loadu_ps(sn)), k);
                        let (a1, b1) =
                            term::<LOSS>(_mm256_sub_ps(si, _mm256_loadu_ps(sn.add(LANES))), k);
                        l0 = _mm256_add_ps(l0, a0);
                        l1 = _mm256_add_ps(l1, a1);
                        g0 = _mm256_add_ps(g0, b0);
                        g1 = _mm256_add_ps(g1, b1);
                        _mm256_storeu_ps(bs, _mm256_fmadd_ps(vv, b0, _mm256_loadu_ps(bs)));
                        let bs1 = bs.add(LANES);
                        _mm256_storeu_ps(bs1, _mm256_fmadd_ps(vv, b1, _mm256_loadu_ps(bs1)));
                    }
                    j += 2 * LANES;
                }
                while j < end {
                    // Fewer than 16 left: go through zero-padded buffers, masking the pad.
                    let m = (end - j).min(LANES);
                    let mut s_buf = [0.0f32; LANES];
                    s_buf[..m].copy_from_slice(&neg[j..j + m]);
                    let mask = lane_mask(m);
                    let (a, b) = term::<LOSS>(_mm256_sub_ps(si, load8(&s_buf)), k);
                    let b = _mm256_and_ps(b, mask);
                    l0 = _mm256_add_ps(l0, _mm256_and_ps(a, mask));
                    g0 = _mm256_add_ps(g0, b);
                    let mut acc = [0.0f32; LANES];
                    acc[..m].copy_from_slice(&block_slopes[j..j + m]);
                    let acc_v = _mm256_fmadd_ps(vv, b, load8(&acc));
                    // SAFETY: `acc` holds exactly eight f32.
                    unsafe { _mm256_storeu_ps(acc.as_mut_ptr(), acc_v) };
                    block_slopes[j..j + m].copy_from_slice(&acc[..m]);
                    j += m;
                }
                loss_i += f64::from(hsum8(_mm256_add_ps(l0, l1)));
                slope_i += f64::from(hsum8(_mm256_add_ps(g0, g1)));
                chunk = end;
            }
            let vi = f64::from(vi);
            total += vi * loss_i;
            grad_pos[i] = kappa * vi * slope_i;
        }
        for (g, &s) in grad_neg.iter_mut().zip(&block_slopes) {
            *g += f64::from(s);
        }
        first = last;
    }
    for g in grad_neg.iter_mut() {
        *g *= -kappa;
    }
    total
}

/// All-ones in the first `m` lanes, zero in the rest.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn lane_mask(m: usize) -> __m256 {
    _mm256_castsi256_ps(lane_mask_i(m))
}

#[target_feature(enable = "avx2,fma")]
#[inline]
fn lane_mask_i(m: usize) -> __m256i {
    let index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_cmpgt_epi32(_mm256_set1_epi32(m as i32), index)
}

#[target_feature(enable = "avx2,fma")]
#[inline]
fn term<const LOSS: u8>(x: __m256, k: __m256) -> (__m256, __m256) {
    match LOSS {
        HUBER => huber(x, k),
        LOGISTIC => logistic(x, k),
        HINGE => hinge(x, k),
        _ => squared_hinge(x, k),
    }
}

/// Branch-free one-sided Huber: with `t = 1 − x/τ`, `u = max(t, 0)`, `c = min(u, 1)`:
/// `ℓ = c² + 2(u − c)` (equals `2t − 1 = 1 − 2x/τ` when `t > 1`, `t²` on the quadratic
/// piece, 0 past τ) and `g = c`.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn huber(x: __m256, inv_tau: __m256) -> (__m256, __m256) {
    let one = _mm256_set1_ps(1.0);
    let t = _mm256_fnmadd_ps(x, inv_tau, one);
    let u = _mm256_max_ps(t, _mm256_setzero_ps());
    let c = _mm256_min_ps(u, one);
    let excess = _mm256_sub_ps(u, c);
    (_mm256_fmadd_ps(c, c, _mm256_add_ps(excess, excess)), c)
}

/// `ℓ = max(z, 0) + log1p(e^{−|z|})`, `g = sigmoid(z)`, `z = −σx` (`neg_sigma` = −σ).
#[target_feature(enable = "avx2,fma")]
#[inline]
fn logistic(x: __m256, neg_sigma: __m256) -> (__m256, __m256) {
    let z = _mm256_mul_ps(neg_sigma, x);
    let abs_z = _mm256_andnot_ps(_mm256_set1_ps(-0.0), z);
    let e = exp_neg(abs_z);
    let softplus = _mm256_add_ps(_mm256_max_ps(z, _mm256_setzero_ps()), log1p_unit(e));
    let r = _mm256_div_ps(_mm256_set1_ps(1.0), _mm256_add_ps(_mm256_set1_ps(1.0), e));
    let z_nonneg = _mm256_cmp_ps::<_CMP_GE_OQ>(z, _mm256_setzero_ps());
    (softplus, _mm256_blendv_ps(_mm256_mul_ps(e, r), r, z_nonneg))
}

#[target_feature(enable = "avx2,fma")]
#[inline]
fn hinge(x: __m256, margin: __m256) -> (__m256, __m256) {
    let active = _mm256_cmp_ps::<_CMP_LT_OQ>(x, margin);
    let h = _mm256_max_ps(_mm256_sub_ps(margin, x), _mm256_setzero_ps());
    (h, _mm256_and_ps(active, _mm256_set1_ps(1.0)))
}

#[target_feature(enable = "avx2,fma")]
#[inline]
fn squared_hinge(x: __m256, margin: __m256) -> (__m256, __m256) {
    let h = _mm256_max_ps(_mm256_sub_ps(margin, x), _mm256_setzero_ps());
    (_mm256_mul_ps(h, h), h)
}

/// `e^{−a}` for `a ≥ 0` (including +inf), after Cephes `expf`: `n = round(−a·log₂e)`,
/// `r = −a − n·ln 2` in two parts, a degree-7 polynomial for `e^r` on `|r| ≤ ln2/2`, then
/// `2^n` applied in two halves so results down to the smallest subnormal are right.
/// Relative error ≤ 2 ulp on normal results (measured in this file's tests).
#[target_feature(enable = "avx2,fma")]
#[inline]
fn exp_neg(a: __m256) -> __m256 {
    let y = _mm256_max_ps(
        _mm256_sub_ps(_mm256_setzero_ps(), a),
        _mm256_set1_ps(EXP_MIN_ARG),
    );
    let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_ps(
        y,
        _mm256_set1_ps(std::f32::consts::LOG2_E),
    ));
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_HI), y);
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_LO), r);
    let mut p = _mm256_set1_ps(EXP_POLY[0]);
    for &c in &EXP_POLY[1..] {
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
    }
    let p = _mm256_fmadd_ps(
        p,
        _mm256_mul_ps(r, r),
        _mm256_add_ps(r, _mm256_set1_ps(1.0)),
    );
    let ni = _mm256_cvtps_epi32(n);
    let n1 = _mm256_srai_epi32::<1>(ni);
    let n2 = _mm256_sub_epi32(ni, n1);
    _mm256_mul_ps(_mm256_mul_ps(p, pow2(n1)), pow2(n2))
}

/// `2^k` for `−126 ≤ k ≤ 127`, built from the exponent bits.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn pow2(k: __m256i) -> __m256 {
    _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(
        k,
        _mm256_set1_epi32(127),
    )))
}

/// `ln(1 + e)` for `0 ≤ e ≤ 1` as `2·atanh(s)`, `s = e/(2 + e) ≤ 1/3`: the odd series to
/// `s¹³` leaves a relative truncation error below 1.5e-8 and keeps full relative accuracy
/// for tiny `e`, where `ln(1 + e)` computed directly would round to 0.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn log1p_unit(e: __m256) -> __m256 {
    let s = _mm256_div_ps(e, _mm256_add_ps(_mm256_set1_ps(2.0), e));
    let s2 = _mm256_mul_ps(s, s);
    let mut p = _mm256_set1_ps(ATANH_SERIES[0]);
    for &c in &ATANH_SERIES[1..] {
        p = _mm256_fmadd_ps(p, s2, _mm256_set1_ps(c));
    }
    _mm256_mul_ps(_mm256_add_ps(s, s), p)
}

// ---------------------------------------------------------------------------------------
// Pair counts
// ---------------------------------------------------------------------------------------

pub(super) fn pair_counts(pos: &[f32], neg: &[f32], per_positive: &mut [PairCount]) {
    assert_supported();
    // SAFETY: the CPU supports AVX2 and FMA (asserted above).
    unsafe { pair_counts_avx2(pos, neg, per_positive) }
}

/// Compare masks are −1 per true lane, so subtracting them counts. Lane counters are i32:
/// exact for up to 8·(2³¹ − 1) negatives. The tail is padded with NaN, which compares false.
#[target_feature(enable = "avx2,fma")]
fn pair_counts_avx2(pos: &[f32], neg: &[f32], per_positive: &mut [PairCount]) {
    let full = neg.len() - neg.len() % LANES;
    let mut tail = [f32::NAN; LANES];
    tail[..neg.len() - full].copy_from_slice(&neg[full..]);
    for (&p, count) in pos.iter().zip(per_positive.iter_mut()) {
        let si = _mm256_set1_ps(p);
        let mut counts = (_mm256_setzero_si256(), _mm256_setzero_si256());
        for chunk in neg[..full].chunks_exact(LANES) {
            counts = tally(load8(chunk), si, counts);
        }
        let (below, ties) = tally(load8(&tail), si, counts);
        *count = PairCount {
            below: lane_total(below),
            ties: lane_total(ties),
        };
    }
}

/// Adds this vector's (below, tied) lanes to the running counters.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn tally(s: __m256, si: __m256, (below, ties): (__m256i, __m256i)) -> (__m256i, __m256i) {
    let lt = _mm256_cmp_ps::<_CMP_LT_OQ>(s, si);
    let eq = _mm256_cmp_ps::<_CMP_EQ_OQ>(s, si);
    (
        _mm256_sub_epi32(below, _mm256_castps_si256(lt)),
        _mm256_sub_epi32(ties, _mm256_castps_si256(eq)),
    )
}

#[target_feature(enable = "avx2,fma")]
#[inline]
fn lane_total(v: __m256i) -> u64 {
    let mut lanes = [0i32; LANES];
    // SAFETY: `lanes` is 32 bytes, the size of one __m256i.
    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), v) };
    lanes.iter().map(|&c| c as u32 as u64).sum()
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
    hsum8(sum) + block[full..].iter().sum::<f32>()
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
    hsum8(sum)
}

#[cfg(test)]
mod tests {
    use super::super::Isa;
    use super::*;

    fn exp_neg_lanes(a: [f32; LANES]) -> [f32; LANES] {
        let mut out = [0.0f32; LANES];
        // SAFETY: tests only call this after checking AVX2 + FMA; arrays hold eight f32.
        unsafe {
            let r = exp_neg(_mm256_loadu_ps(a.as_ptr()));
            _mm256_storeu_ps(out.as_mut_ptr(), r);
        }
        out
    }

    fn log1p_lanes(e: [f32; LANES]) -> [f32; LANES] {
        let mut out = [0.0f32; LANES];
        // SAFETY: as above.
        unsafe {
            let r = log1p_unit(_mm256_loadu_ps(e.as_ptr()));
            _mm256_storeu_ps(out.as_mut_ptr(), r);
        }
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
