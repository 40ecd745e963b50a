//! The x86-64 kernels written once over a [`Vector`] width (`sse.rs`: 4 lanes, `avx2.rs`: 8).
//! Same results as `scalar.rs`: bit-for-bit for scoring and counts, within the module's stated
//! tolerance for losses.
//!
//! Everything here is `#[inline(always)]` and `unsafe`: it runs only inlined into a width's
//! `#[target_feature]` function, on a CPU that has the width's instructions (the
//! [`Vector`] contract).

use std::arch::x86_64::*;

use super::loss::Loss;
use super::scalar::PARTIALS;
use super::vector::{hsum4, reduce_quads, Vector};
use super::PairCount;

/// Positives whose weighted slopes are summed in f32 before moving to the f64 gradient.
const POS_BLOCK: usize = 64;
/// f32 terms a lane adds before its sums are flushed to f64: two accumulators share each chunk
/// of negatives, so a chunk holds `2 · 32 · LANES` of them.
const LANE_TERMS: usize = 32;

const HUBER: u8 = 0;
const LOGISTIC: u8 = 1;
const HINGE: u8 = 2;
const SQUARED_HINGE: u8 = 3;

// ---------------------------------------------------------------------------------------
// Block scoring
// ---------------------------------------------------------------------------------------

/// `out[r] = x_r · w` in the canonical order of `scalar::dot`, `ROWS` rows at a time (as many
/// as keep their partial sums in registers: 2 on SSE, 4 on AVX2); four rows' sums are reduced
/// together (one transposing shuffle tree, one store).
#[inline(always)]
pub(super) unsafe fn score_block<V: Vector, const ROWS: usize>(
    x: &[f32],
    d: usize,
    w: &[f32],
    out: &mut [f32],
) {
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
        let mut quads = [_mm_setzero_ps(); 4];
        for first in (0..4).step_by(ROWS) {
            let rows = std::array::from_fn(|i| row(r + first + i));
            let sums = dot_rows::<V, ROWS>(rows, w, full, &w_tail);
            quads[first..first + ROWS].copy_from_slice(&sums);
        }
        // r + 4 <= n == out.len().
        _mm_storeu_ps(out.as_mut_ptr().add(r), reduce_quads(quads));
        r += 4;
    }
    while r < n {
        out[r] = hsum4(dot_rows::<V, 1>([row(r)], w, full, &w_tail)[0]);
        r += 1;
    }
}

/// The quad sums of `R` rows: partial `l` of a row is lane `l mod LANES` of its register
/// `l / LANES`, as `Vector::row_quads` expects.
#[inline(always)]
unsafe fn dot_rows<V: Vector, const R: usize>(
    rows: [&[f32]; R],
    w: &[f32],
    full: usize,
    w_tail: &[f32; PARTIALS],
) -> [__m128; R] {
    let regs = PARTIALS / V::LANES;
    let mut acc = [[V::zero(); 4]; R];
    let mut k = 0;
    while k < full {
        // k + 16 <= full <= d == w.len(); every row also has length d.
        let mut wv = [V::zero(); 4];
        for (q, wq) in wv.iter_mut().enumerate().take(regs) {
            *wq = V::load(w.as_ptr().add(k + q * V::LANES));
        }
        for (row, acc) in rows.iter().zip(acc.iter_mut()) {
            for (q, (a, wq)) in acc.iter_mut().zip(&wv).enumerate().take(regs) {
                let xv = V::load(row.as_ptr().add(k + q * V::LANES));
                *a = a.add(xv.mul(*wq));
            }
        }
        k += PARTIALS;
    }
    // The tail: element full + i goes to partial i, as in the scalar order. Lanes past the end
    // load +0.0 and meet the zero padding of `w_tail`, adding +0.0, which leaves every partial
    // unchanged (a partial that starts at +0.0 can never be -0.0).
    // Every register's turn is decided by a test, not a loop bound, so that the accumulators
    // stay in registers.
    let d = w.len();
    if full < d {
        let mut wt = [V::zero(); 4];
        for (q, wq) in wt.iter_mut().enumerate().take(regs) {
            *wq = V::load(w_tail.as_ptr().add(q * V::LANES));
        }
        for (row, acc) in rows.iter().zip(acc.iter_mut()) {
            for (q, (a, wq)) in acc.iter_mut().zip(&wt).enumerate().take(regs) {
                let start = full + q * V::LANES;
                if start < d {
                    *a = a.add(V::load_prefix(&row[start..]).mul(*wq));
                }
            }
        }
    }
    let mut quads = [_mm_setzero_ps(); R];
    for (q, partials) in quads.iter_mut().zip(&acc) {
        *q = V::row_quads(partials);
    }
    quads
}

// ---------------------------------------------------------------------------------------
// All-pairs loss and gradient
// ---------------------------------------------------------------------------------------

/// `scalar::pair_loss_grad` on vectors: the match on the loss sits outside the pair loop.
#[inline(always)]
pub(super) unsafe fn pair_loss_grad<V: Vector>(
    pos: &[f32],
    neg: &[f32],
    v: &[f32],
    loss: Loss,
    grad_pos: &mut [f64],
    grad_neg: &mut [f64],
) -> f64 {
    let kappa = loss.slope_scale();
    match loss {
        Loss::Huber { tau } => {
            all_pairs::<V, HUBER>(pos, neg, v, 1.0 / tau, kappa, grad_pos, grad_neg)
        }
        Loss::Logistic { sigma } => {
            all_pairs::<V, LOGISTIC>(pos, neg, v, -sigma, kappa, grad_pos, grad_neg)
        }
        Loss::Hinge { margin } => {
            all_pairs::<V, HINGE>(pos, neg, v, margin, kappa, grad_pos, grad_neg)
        }
        Loss::SquaredHinge { margin } => {
            all_pairs::<V, SQUARED_HINGE>(pos, neg, v, margin, kappa, grad_pos, grad_neg)
        }
    }
}

/// The i-outer, j-inner pair loop; `param` is 1/τ, −σ or the margin depending on `LOSS`.
#[inline(always)]
unsafe fn all_pairs<V: Vector, const LOSS: u8>(
    pos: &[f32],
    neg: &[f32],
    v: &[f32],
    param: f32,
    kappa: f64,
    grad_pos: &mut [f64],
    grad_neg: &mut [f64],
) -> f64 {
    let lanes = V::LANES;
    let neg_chunk = 2 * LANE_TERMS * lanes;
    let n = neg.len();
    let k = V::splat(param);
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
            let si = V::splat(pos[i]);
            let vv = V::splat(vi);
            let (mut loss_i, mut slope_i) = (0.0f64, 0.0f64);
            let mut chunk = 0;
            while chunk < n {
                let end = (chunk + neg_chunk).min(n);
                let (mut l0, mut l1) = (V::zero(), V::zero());
                let (mut g0, mut g1) = (V::zero(), V::zero());
                let mut j = chunk;
                while j + 2 * lanes <= end {
                    // j + 2·LANES <= end <= n == neg.len() == block_slopes.len().
                    let sn = neg.as_ptr().add(j);
                    let bs = block_slopes.as_mut_ptr().add(j);
                    let (a0, b0) = term::<V, LOSS>(si.sub(V::load(sn)), k);
                    let (a1, b1) = term::<V, LOSS>(si.sub(V::load(sn.add(lanes))), k);
                    l0 = l0.add(a0);
                    l1 = l1.add(a1);
                    g0 = g0.add(b0);
                    g1 = g1.add(b1);
                    vv.mul_add(b0, V::load(bs)).store(bs);
                    let bs1 = bs.add(lanes);
                    vv.mul_add(b1, V::load(bs1)).store(bs1);
                    j += 2 * lanes;
                }
                while j < end {
                    // Fewer than 2·LANES left: go through zero-padded buffers, masking the pad.
                    let m = (end - j).min(lanes);
                    let mask = V::first_lanes(m);
                    let (a, b) = term::<V, LOSS>(si.sub(V::load_prefix(&neg[j..j + m])), k);
                    let b = b.and(mask);
                    l0 = l0.add(a.and(mask));
                    g0 = g0.add(b);
                    let mut acc = [0.0f32; 8];
                    vv.mul_add(b, V::load_prefix(&block_slopes[j..j + m]))
                        .store(acc.as_mut_ptr());
                    block_slopes[j..j + m].copy_from_slice(&acc[..m]);
                    j += m;
                }
                loss_i += f64::from(l0.add(l1).sum());
                slope_i += f64::from(g0.add(g1).sum());
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

/// `(ℓ(x), g(x))` per lane (`loss.rs` has the scalar forms).
#[inline(always)]
unsafe fn term<V: Vector, const LOSS: u8>(x: V, k: V) -> (V, V) {
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
#[inline(always)]
unsafe fn huber<V: Vector>(x: V, inv_tau: V) -> (V, V) {
    let one = V::splat(1.0);
    let t = x.neg_mul_add(inv_tau, one);
    let u = t.max(V::zero());
    let c = u.min(one);
    let excess = u.sub(c);
    (c.mul_add(c, excess.add(excess)), c)
}

/// `ℓ = max(z, 0) + log1p(e^{−|z|})`, `g = sigmoid(z)`, `z = −σx` (`neg_sigma` = −σ).
#[inline(always)]
unsafe fn logistic<V: Vector>(x: V, neg_sigma: V) -> (V, V) {
    let z = neg_sigma.mul(x);
    let e = exp_neg(z.abs());
    let softplus = z.max(V::zero()).add(log1p_unit(e));
    let r = V::splat(1.0).div(V::splat(1.0).add(e));
    (softplus, e.mul(r).blend(r, z.ge(V::zero())))
}

#[inline(always)]
unsafe fn hinge<V: Vector>(x: V, margin: V) -> (V, V) {
    let active = x.lt(margin);
    let h = margin.sub(x).max(V::zero());
    (h, active.and(V::splat(1.0)))
}

#[inline(always)]
unsafe fn squared_hinge<V: Vector>(x: V, margin: V) -> (V, V) {
    let h = margin.sub(x).max(V::zero());
    (h.mul(h), h)
}

/// Arguments below this give `e^y < 2⁻¹⁵⁰`, which rounds to 0 in f32.
const EXP_MIN_ARG: f32 = -104.0;
/// ln 2 split so that `n·LN2_HI` is exact for |n| ≤ 150 (Cephes).
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// Cephes `expf` coefficients, highest first: `e^r ≈ 1 + r + r²·P(r)`.
const EXP_POLY: [f32; 6] = [
    1.987_569_1e-4,
    1.398_199_9e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    1.666_666_5e-1,
    0.5, // Cephes prints 5.0000001201e-1, which is 0.5 in f32
];
/// `1/13, 1/11, …, 1/3, 1`: `atanh(s)/s` as a polynomial in s², highest first.
const ATANH_SERIES: [f32; 7] = [
    1.0 / 13.0,
    1.0 / 11.0,
    1.0 / 9.0,
    1.0 / 7.0,
    1.0 / 5.0,
    1.0 / 3.0,
    1.0,
];

/// `e^{−a}` for `a ≥ 0` (including +inf), after Cephes `expf`: `n = round(−a·log₂e)`,
/// `r = −a − n·ln 2` in two parts (`n·LN2_HI` is exact, so the reduction loses nothing even
/// unfused), a degree-7 polynomial for `e^r` on `|r| ≤ ln2/2`, then `2^n` applied in two
/// halves so results down to the smallest subnormal are right. Relative error ≤ 2 ulp on
/// normal results (measured in `avx2.rs`'s tests).
#[inline(always)]
pub(super) unsafe fn exp_neg<V: Vector>(a: V) -> V {
    let y = V::zero().sub(a).max(V::splat(EXP_MIN_ARG));
    let n = y.mul(V::splat(std::f32::consts::LOG2_E)).round();
    let r = n.neg_mul_add(V::splat(LN2_HI), y);
    let r = n.neg_mul_add(V::splat(LN2_LO), r);
    let mut p = V::splat(EXP_POLY[0]);
    for &c in &EXP_POLY[1..] {
        p = p.mul_add(r, V::splat(c));
    }
    p.mul_add(r.mul(r), r.add(V::splat(1.0))).ldexp(n)
}

/// `ln(1 + e)` for `0 ≤ e ≤ 1` as `2·atanh(s)`, `s = e/(2 + e) ≤ 1/3`: the odd series to
/// `s¹³` leaves a relative truncation error below 1.5e-8 and keeps full relative accuracy
/// for tiny `e`, where `ln(1 + e)` computed directly would round to 0.
#[inline(always)]
pub(super) unsafe fn log1p_unit<V: Vector>(e: V) -> V {
    let s = e.div(V::splat(2.0).add(e));
    let s2 = s.mul(s);
    let mut p = V::splat(ATANH_SERIES[0]);
    for &c in &ATANH_SERIES[1..] {
        p = p.mul_add(s2, V::splat(c));
    }
    s.add(s).mul(p)
}

// ---------------------------------------------------------------------------------------
// Pair counts
// ---------------------------------------------------------------------------------------

/// Compare masks are −1 per true lane, so subtracting them counts. Lane counters are i32:
/// exact for up to LANES·(2³¹ − 1) negatives. The tail is padded with NaN, which compares
/// false.
#[inline(always)]
pub(super) unsafe fn pair_counts<V: Vector>(
    pos: &[f32],
    neg: &[f32],
    per_positive: &mut [PairCount],
) {
    let lanes = V::LANES;
    let full = neg.len() - neg.len() % lanes;
    let mut tail = [f32::NAN; 8];
    tail[..neg.len() - full].copy_from_slice(&neg[full..]);
    for (&p, count) in pos.iter().zip(per_positive.iter_mut()) {
        let si = V::splat(p);
        let mut counts = (V::counts_zero(), V::counts_zero());
        for chunk in neg[..full].chunks_exact(lanes) {
            counts = tally(V::load(chunk.as_ptr()), si, counts);
        }
        let (below, ties) = tally(V::load(tail.as_ptr()), si, counts);
        *count = PairCount {
            below: V::counts_total(below),
            ties: V::counts_total(ties),
        };
    }
}

/// Adds this vector's (below, tied) lanes to the running counters.
#[inline(always)]
unsafe fn tally<V: Vector>(
    s: V,
    si: V,
    (below, ties): (V::Counts, V::Counts),
) -> (V::Counts, V::Counts) {
    (V::count(below, s.lt(si)), V::count(ties, s.eq(si)))
}
