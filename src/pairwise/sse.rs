//! SSE4.1 versions of the pairwise kernels (4 f32 lanes, no FMA): the x86-64 baseline path.
//! Same algorithms as `avx2.rs` (shared constants in `x86.rs`), with multiply + add where AVX2
//! fuses.
//!
//! Each public function checks the CPU (a cached atomic load) before calling its
//! `#[target_feature]` twin, which makes the `unsafe` calls sound on their own.

use std::arch::x86_64::*;

use super::loss::Loss;
use super::scalar::PARTIALS;
use super::x86::{reduce_quads, ATANH_SERIES, EXP_MIN_ARG, EXP_POLY, LN2_HI, LN2_LO};
use super::PairCount;

const LANES: usize = 4;
/// See `avx2.rs`: each lane adds at most 256 / 8 = 32 terms before a flush to f64, and
/// at most 64 positives' slopes go into a negative's f32 sum.
const POS_BLOCK: usize = 64;
const NEG_CHUNK: usize = 256;

const HUBER: u8 = 0;
const LOGISTIC: u8 = 1;
const HINGE: u8 = 2;
const SQUARED_HINGE: u8 = 3;

fn assert_supported() {
    assert!(
        is_x86_feature_detected!("sse4.1"),
        "the SSE pairwise path needs SSE4.1"
    );
}

#[target_feature(enable = "sse4.1")]
#[inline]
fn load4(values: &[f32]) -> __m128 {
    assert!(values.len() >= LANES);
    // SAFETY: the slice holds at least four f32 (asserted).
    unsafe { _mm_loadu_ps(values.as_ptr()) }
}

// ---------------------------------------------------------------------------------------
// Block scoring
// ---------------------------------------------------------------------------------------

pub(super) fn score_block(x: &[f32], d: usize, w: &[f32], out: &mut [f32]) {
    assert_supported();
    // SAFETY: the CPU supports SSE4.1 (asserted above).
    unsafe { score_block_sse(x, d, w, out) }
}

/// Two rows at a time (16 partials per row already take four registers each); four rows'
/// sums are reduced together by [`reduce_quads`].
#[target_feature(enable = "sse4.1")]
fn score_block_sse(x: &[f32], d: usize, w: &[f32], out: &mut [f32]) {
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
        let [a, b] = dot_rows([row(r), row(r + 1)], w, full, &w_tail);
        let [c, d] = dot_rows([row(r + 2), row(r + 3)], w, full, &w_tail);
        // SAFETY: r + 4 <= n == out.len().
        unsafe { _mm_storeu_ps(out.as_mut_ptr().add(r), reduce_quads([a, b, c, d])) };
        r += 4;
    }
    while r < n {
        out[r] = hsum4(dot_rows([row(r)], w, full, &w_tail)[0]);
        r += 1;
    }
}

/// Partials 4q..4q+4 of row r live in `acc[r][q]`, the canonical order of `scalar::dot`.
#[target_feature(enable = "sse4.1")]
#[inline]
fn dot_rows<const R: usize>(
    rows: [&[f32]; R],
    w: &[f32],
    full: usize,
    w_tail: &[f32; PARTIALS],
) -> [__m128; R] {
    let mut acc = [[_mm_setzero_ps(); 4]; R];
    let mut k = 0;
    while k < full {
        // SAFETY: k + 16 <= full <= d == w.len(); every row also has length d.
        let wv: [__m128; 4] =
            std::array::from_fn(|q| unsafe { _mm_loadu_ps(w.as_ptr().add(k + 4 * q)) });
        for r in 0..R {
            for q in 0..4 {
                // SAFETY: as above, rows[r].len() == d >= k + 16.
                let xv = unsafe { _mm_loadu_ps(rows[r].as_ptr().add(k + 4 * q)) };
                acc[r][q] = _mm_add_ps(acc[r][q], _mm_mul_ps(xv, wv[q]));
            }
        }
        k += PARTIALS;
    }
    let d = w.len();
    if full < d {
        // Tail element full + 4q + l goes to partial 4q + l, as in the scalar order: whole
        // groups of four load directly, the last partial group through a zero-padded buffer
        // (+0.0 added to a partial that is never -0.0 changes nothing, see avx2.rs).
        let rem = d - full;
        for r in 0..R {
            for q in 0..rem.div_ceil(LANES) {
                let start = full + 4 * q;
                let xv = if start + LANES <= d {
                    load4(&rows[r][start..])
                } else {
                    let mut x_tail = [0.0f32; LANES];
                    x_tail[..d - start].copy_from_slice(&rows[r][start..]);
                    load4(&x_tail)
                };
                acc[r][q] = _mm_add_ps(acc[r][q], _mm_mul_ps(xv, load4(&w_tail[4 * q..])));
            }
        }
    }
    std::array::from_fn(|r| {
        let [p0, p1, p2, p3] = acc[r];
        // Partials l and l+8 (l = 0..8), then l and l+4: the row's four quad sums.
        _mm_add_ps(_mm_add_ps(p0, p2), _mm_add_ps(p1, p3))
    })
}

#[target_feature(enable = "sse4.1")]
#[inline]
fn hsum4(q: __m128) -> f32 {
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
    // SAFETY (all four arms): the CPU supports SSE4.1 (asserted above).
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

/// The same loop as `avx2::all_pairs`, on 4-lane registers.
#[target_feature(enable = "sse4.1")]
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
    let k = _mm_set1_ps(param);
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
            let si = _mm_set1_ps(pos[i]);
            let vv = _mm_set1_ps(vi);
            let (mut loss_i, mut slope_i) = (0.0f64, 0.0f64);
            let mut chunk = 0;
            while chunk < n {
                let end = (chunk + NEG_CHUNK).min(n);
                let (mut l0, mut l1) = (_mm_setzero_ps(), _mm_setzero_ps());
                let (mut g0, mut g1) = (_mm_setzero_ps(), _mm_setzero_ps());
                let mut j = chunk;
                while j + 2 * LANES <= end {
                    // SAFETY: j + 8 <= end <= n == neg.len() == block_slopes.len().
                    unsafe {
                        let sn = neg.as_ptr().add(j);
                        let bs = block_slopes.as_mut_ptr().add(j);
                        let (a0, b0) = term::<LOSS>(_mm_sub_ps(si, _mm_loadu_ps(sn)), k);
                        let (a1, b1) = term::<LOSS>(_mm_sub_ps(si, _mm_loadu_ps(sn.add(LANES))), k);
                        l0 = _mm_add_ps(l0, a0);
                        l1 = _mm_add_ps(l1, a1);
                        g0 = _mm_add_ps(g0, b0);
                        g1 = _mm_add_ps(g1, b1);
                        _mm_storeu_ps(bs, _mm_add_ps(_mm_loadu_ps(bs), _mm_mul_ps(vv, b0)));
                        let bs1 = bs.add(LANES);
                        _mm_storeu_ps(bs1, _mm_add_ps(_mm_loadu_ps(bs1), _mm_mul_ps(vv, b1)));
                    }
                    j += 2 * LANES;
                }
                while j < end {
                    let m = (end - j).min(LANES);
                    let mut s_buf = [0.0f32; LANES];
                    s_buf[..m].copy_from_slice(&neg[j..j + m]);
                    let mask = lane_mask(m);
                    let (a, b) = term::<LOSS>(_mm_sub_ps(si, load4(&s_buf)), k);
                    let b = _mm_and_ps(b, mask);
                    l0 = _mm_add_ps(l0, _mm_and_ps(a, mask));
                    g0 = _mm_add_ps(g0, b);
                    let mut acc = [0.0f32; LANES];
                    acc[..m].copy_from_slice(&block_slopes[j..j + m]);
                    let acc_v = _mm_add_ps(load4(&acc), _mm_mul_ps(vv, b));
                    // SAFETY: `acc` holds exactly four f32.
                    unsafe { _mm_storeu_ps(acc.as_mut_ptr(), acc_v) };
                    block_slopes[j..j + m].copy_from_slice(&acc[..m]);
                    j += m;
                }
                loss_i += f64::from(hsum4(_mm_add_ps(l0, l1)));
                slope_i += f64::from(hsum4(_mm_add_ps(g0, g1)));
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

#[target_feature(enable = "sse4.1")]
#[inline]
fn lane_mask(m: usize) -> __m128 {
    let index = _mm_setr_epi32(0, 1, 2, 3);
    _mm_castsi128_ps(_mm_cmpgt_epi32(_mm_set1_epi32(m as i32), index))
}

#[target_feature(enable = "sse4.1")]
#[inline]
fn term<const LOSS: u8>(x: __m128, k: __m128) -> (__m128, __m128) {
    match LOSS {
        HUBER => huber(x, k),
        LOGISTIC => logistic(x, k),
        HINGE => hinge(x, k),
        _ => squared_hinge(x, k),
    }
}

/// See `avx2::huber` for the branch-free form.
#[target_feature(enable = "sse4.1")]
#[inline]
fn huber(x: __m128, inv_tau: __m128) -> (__m128, __m128) {
    let one = _mm_set1_ps(1.0);
    let t = _mm_sub_ps(one, _mm_mul_ps(x, inv_tau));
    let u = _mm_max_ps(t, _mm_setzero_ps());
    let c = _mm_min_ps(u, one);
    let excess = _mm_sub_ps(u, c);
    (_mm_add_ps(_mm_mul_ps(c, c), _mm_add_ps(excess, excess)), c)
}

#[target_feature(enable = "sse4.1")]
#[inline]
fn logistic(x: __m128, neg_sigma: __m128) -> (__m128, __m128) {
    let z = _mm_mul_ps(neg_sigma, x);
    let abs_z = _mm_andnot_ps(_mm_set1_ps(-0.0), z);
    let e = exp_neg(abs_z);
    let softplus = _mm_add_ps(_mm_max_ps(z, _mm_setzero_ps()), log1p_unit(e));
    let r = _mm_div_ps(_mm_set1_ps(1.0), _mm_add_ps(_mm_set1_ps(1.0), e));
    let z_nonneg = _mm_cmpge_ps(z, _mm_setzero_ps());
    (softplus, _mm_blendv_ps(_mm_mul_ps(e, r), r, z_nonneg))
}

#[target_feature(enable = "sse4.1")]
#[inline]
fn hinge(x: __m128, margin: __m128) -> (__m128, __m128) {
    let active = _mm_cmplt_ps(x, margin);
    let h = _mm_max_ps(_mm_sub_ps(margin, x), _mm_setzero_ps());
    (h, _mm_and_ps(active, _mm_set1_ps(1.0)))
}

#[target_feature(enable = "sse4.1")]
#[inline]
fn squared_hinge(x: __m128, margin: __m128) -> (__m128, __m128) {
    let h = _mm_max_ps(_mm_sub_ps(margin, x), _mm_setzero_ps());
    (_mm_mul_ps(h, h), h)
}

/// `avx2::exp_neg` without FMA; `n·LN2_HI` is exact, so the reduction loses nothing.
#[target_feature(enable = "sse4.1")]
#[inline]
fn exp_neg(a: __m128) -> __m128 {
    let y = _mm_max_ps(_mm_sub_ps(_mm_setzero_ps(), a), _mm_set1_ps(EXP_MIN_ARG));
    let n = _mm_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm_mul_ps(
        y,
        _mm_set1_ps(std::f32::consts::LOG2_E),
    ));
    let r = _mm_sub_ps(y, _mm_mul_ps(n, _mm_set1_ps(LN2_HI)));
    let r = _mm_sub_ps(r, _mm_mul_ps(n, _mm_set1_ps(LN2_LO)));
    let mut p = _mm_set1_ps(EXP_POLY[0]);
    for &c in &EXP_POLY[1..] {
        p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(c));
    }
    let p = _mm_add_ps(
        _mm_mul_ps(p, _mm_mul_ps(r, r)),
        _mm_add_ps(r, _mm_set1_ps(1.0)),
    );
    let ni = _mm_cvtps_epi32(n);
    let n1 = _mm_srai_epi32::<1>(ni);
    let n2 = _mm_sub_epi32(ni, n1);
    _mm_mul_ps(_mm_mul_ps(p, pow2(n1)), pow2(n2))
}

#[target_feature(enable = "sse4.1")]
#[inline]
fn pow2(k: __m128i) -> __m128 {
    _mm_castsi128_ps(_mm_slli_epi32::<23>(_mm_add_epi32(k, _mm_set1_epi32(127))))
}

/// `avx2::log1p_unit` without FMA.
#[target_feature(enable = "sse4.1")]
#[inline]
fn log1p_unit(e: __m128) -> __m128 {
    let s = _mm_div_ps(e, _mm_add_ps(_mm_set1_ps(2.0), e));
    let s2 = _mm_mul_ps(s, s);
    let mut p = _mm_set1_ps(ATANH_SERIES[0]);
    for &c in &ATANH_SERIES[1..] {
        p = _mm_add_ps(_mm_mul_ps(p, s2), _mm_set1_ps(c));
    }
    _mm_mul_ps(_mm_add_ps(s, s), p)
}

// ---------------------------------------------------------------------------------------
// Pair counts
// ---------------------------------------------------------------------------------------

pub(super) fn pair_counts(pos: &[f32], neg: &[f32], per_positive: &mut [PairCount]) {
    assert_supported();
    // SAFETY: the CPU supports SSE4.1 (asserted above).
    unsafe { pair_counts_sse(pos, neg, per_positive) }
}

/// See `avx2::pair_counts_avx2`: mask subtraction, i32 lanes, NaN padding.
#[target_feature(enable = "sse4.1")]
fn pair_counts_sse(pos: &[f32], neg: &[f32], per_positive: &mut [PairCount]) {
    let full = neg.len() - neg.len() % LANES;
    let mut tail = [f32::NAN; LANES];
    tail[..neg.len() - full].copy_from_slice(&neg[full..]);
    for (&p, count) in pos.iter().zip(per_positive.iter_mut()) {
        let si = _mm_set1_ps(p);
        let mut counts = (_mm_setzero_si128(), _mm_setzero_si128());
        for chunk in neg[..full].chunks_exact(LANES) {
            counts = tally(load4(chunk), si, counts);
        }
        let (below, ties) = tally(load4(&tail), si, counts);
        *count = PairCount {
            below: lane_total(below),
            ties: lane_total(ties),
        };
    }
}

#[target_feature(enable = "sse4.1")]
#[inline]
fn tally(s: __m128, si: __m128, (below, ties): (__m128i, __m128i)) -> (__m128i, __m128i) {
    (
        _mm_sub_epi32(below, _mm_castps_si128(_mm_cmplt_ps(s, si))),
        _mm_sub_epi32(ties, _mm_castps_si128(_mm_cmpeq_ps(s, si))),
    )
}

#[target_feature(enable = "sse4.1")]
#[inline]
fn lane_total(v: __m128i) -> u64 {
    let mut lanes = [0i32; LANES];
    // SAFETY: `lanes` is 16 bytes, the size of one __m128i.
    unsafe { _mm_storeu_si128(lanes.as_mut_ptr().cast(), v) };
    lanes.iter().map(|&c| c as u32 as u64).sum()
}
