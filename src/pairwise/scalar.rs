//! Portable scalar twins of the pairwise kernels: the reference the SIMD paths are tested
//! against, and the path on CPUs without SSE4.1. Plain loops, no intrinsics.

use super::loss::{self, Loss};
use super::PairCount;

/// Partial sums per dot product. The SIMD paths keep exactly these partials in their lanes
/// (AVX2: two 8-lane registers, SSE: four 4-lane registers), which is what makes scoring
/// bit-for-bit identical across paths.
pub(super) const PARTIALS: usize = 16;

/// `Σ_k row[k]·w[k]` in the canonical order: product k goes to partial `k mod 16`, then the
/// partials are reduced by [`reduce_partials`]. Multiply and add are separate roundings (no
/// FMA) on every path.
pub(super) fn dot(row: &[f32], w: &[f32]) -> f32 {
    let mut partial = [0.0f32; PARTIALS];
    for (k, (&x, &w)) in row.iter().zip(w).enumerate() {
        partial[k % PARTIALS] += x * w;
    }
    reduce_partials(&partial)
}

/// The reduction tree of a horizontal SIMD sum: partials l and l+8, then m and m+4, then
/// 0+2 and 1+3, then the last two.
pub(super) fn reduce_partials(p: &[f32; PARTIALS]) -> f32 {
    let a: [f32; 8] = std::array::from_fn(|l| p[l] + p[l + 8]);
    let q: [f32; 4] = std::array::from_fn(|m| a[m] + a[m + 4]);
    (q[0] + q[2]) + (q[1] + q[3])
}

pub(super) fn score_block(x: &[f32], d: usize, w: &[f32], out: &mut [f32]) {
    if d == 0 {
        out.fill(0.0);
        return;
    }
    for (row, s) in x.chunks_exact(d).zip(out.iter_mut()) {
        *s = dot(row, w);
    }
}

pub(super) fn pair_loss_grad(
    pos: &[f32],
    neg: &[f32],
    v: &[f32],
    loss: Loss,
    grad_pos: &mut [f64],
    grad_neg: &mut [f64],
) -> f64 {
    // The match sits outside the pair loop so each loss gets its own tight loop.
    let total = match loss {
        Loss::Huber { tau } => {
            let inv_tau = 1.0 / tau;
            all_pairs(pos, neg, v, grad_pos, grad_neg, |x| {
                loss::huber(x, tau, inv_tau)
            })
        }
        Loss::Logistic { sigma } => all_pairs(pos, neg, v, grad_pos, grad_neg, |x| {
            loss::logistic(x, sigma)
        }),
        Loss::Hinge { margin } => {
            all_pairs(pos, neg, v, grad_pos, grad_neg, |x| loss::hinge(x, margin))
        }
        Loss::SquaredHinge { margin } => all_pairs(pos, neg, v, grad_pos, grad_neg, |x| {
            loss::squared_hinge(x, margin)
        }),
    };
    let kappa = loss.slope_scale();
    for (g, &vi) in grad_pos.iter_mut().zip(v) {
        *g *= kappa * f64::from(vi);
    }
    for g in grad_neg.iter_mut() {
        *g *= -kappa;
    }
    total
}

/// Sums `ℓ` and `g` over all pairs in f64. On return `grad_pos[i] = Σ_j g_ij` and
/// `grad_neg[j] = Σ_i v_i g_ij`; the caller applies κ (and v_i to `grad_pos`).
fn all_pairs(
    pos: &[f32],
    neg: &[f32],
    v: &[f32],
    grad_pos: &mut [f64],
    grad_neg: &mut [f64],
    term: impl Fn(f32) -> (f32, f32),
) -> f64 {
    grad_neg.fill(0.0);
    let mut total = 0.0;
    for ((&p, &vi), gp) in pos.iter().zip(v).zip(grad_pos.iter_mut()) {
        if vi == 0.0 {
            // A zero weight contributes nothing; skipping it also keeps 0·inf out of the sums.
            *gp = 0.0;
            continue;
        }
        let vi = f64::from(vi);
        let (mut loss_i, mut slope_i) = (0.0f64, 0.0f64);
        for (&s, gn) in neg.iter().zip(grad_neg.iter_mut()) {
            let (l, g) = term(p - s);
            loss_i += f64::from(l);
            slope_i += f64::from(g);
            *gn += vi * f64::from(g);
        }
        total += vi * loss_i;
        *gp = slope_i;
    }
    total
}

pub(super) fn pair_counts(pos: &[f32], neg: &[f32], per_positive: &mut [PairCount]) {
    for (&p, count) in pos.iter().zip(per_positive.iter_mut()) {
        let mut below = 0u64;
        let mut ties = 0u64;
        for &s in neg {
            below += u64::from(s < p);
            ties += u64::from(s == p);
        }
        *count = PairCount { below, ties };
    }
}
