//! The pairwise surrogates ℓ(x), x = s⁺ − s⁻ (SPEC §7 item 2, §3.3, §3.4).
//!
//! Every surrogate is written as `ℓ'(x) = κ · g(x)` with a per-loss constant `κ` and a
//! "slope weight" `g(x) ≥ 0`. The kernels only sum `ℓ` and `g`; the constant is applied once
//! at the end. Because `ℓ ≥ 0` and `g ≥ 0` for every loss, all the sums the kernels form are
//! sums of same-sign terms, which is what makes blocked f32 accumulation accurate (no
//! cancellation, relative error bounded by the block length times f32 epsilon).

use super::PairwiseError;

/// A pairwise surrogate of the 0-1 loss `[s⁺ ≤ s⁻]`, evaluated at `x = s⁺ − s⁻`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Loss {
    /// One-sided Huber with margin τ (SPEC §3.3, seed 000 eq. 7):
    /// `1 − 2x/τ` for `x < 0`, `(1 − x/τ)²` for `0 ≤ x < τ`, `0` for `x ≥ τ`.
    Huber { tau: f32 },
    /// Pairwise logistic / RankNet (SPEC §3.4): `ln(1 + exp(−σx))`.
    Logistic { sigma: f32 },
    /// Hinge with margin m: `max(0, m − x)`. At the kink `x = m` the slope taken is 0.
    Hinge { margin: f32 },
    /// Squared hinge with margin m: `max(0, m − x)²`.
    SquaredHinge { margin: f32 },
}

impl Loss {
    /// Rejects parameters for which the surrogate is undefined: τ and σ must be finite and
    /// positive, a margin finite and non-negative.
    pub fn validate(self) -> Result<(), PairwiseError> {
        let (name, value, ok) = match self {
            Loss::Huber { tau } => ("tau", tau, tau.is_finite() && tau > 0.0),
            Loss::Logistic { sigma } => ("sigma", sigma, sigma.is_finite() && sigma > 0.0),
            Loss::Hinge { margin } | Loss::SquaredHinge { margin } => {
                ("margin", margin, margin.is_finite() && margin >= 0.0)
            }
        };
        if ok {
            Ok(())
        } else {
            Err(PairwiseError::BadParameter { name, value })
        }
    }

    /// `κ` in `ℓ'(x) = κ · g(x)`.
    pub fn slope_scale(self) -> f64 {
        match self {
            Loss::Huber { tau } => -2.0 / f64::from(tau),
            Loss::Logistic { sigma } => -f64::from(sigma),
            Loss::Hinge { .. } => -1.0,
            Loss::SquaredHinge { .. } => -2.0,
        }
    }

    /// `(ℓ(x), g(x))` in f32, the scalar twin every SIMD path is tested against.
    pub fn term(self, x: f32) -> (f32, f32) {
        match self {
            Loss::Huber { tau } => huber(x, tau, 1.0 / tau),
            Loss::Logistic { sigma } => logistic(x, sigma),
            Loss::Hinge { margin } => hinge(x, margin),
            Loss::SquaredHinge { margin } => squared_hinge(x, margin),
        }
    }
}

// The four terms, written to read like the SPEC; the vector versions in `generic.rs` are
// branch-free rewrites of them. `inv_tau` is passed in so loops hoist 1/τ.

/// One-sided Huber: `g = 1` on the linear piece, `g = 1 − x/τ` on the quadratic one.
#[inline]
pub(super) fn huber(x: f32, tau: f32, inv_tau: f32) -> (f32, f32) {
    if x < 0.0 {
        (1.0 - 2.0 * x * inv_tau, 1.0)
    } else if x < tau {
        let t = 1.0 - x * inv_tau;
        (t * t, t)
    } else {
        (0.0, 0.0)
    }
}

/// `ln(1 + e^z)` and `sigmoid(z)` for `z = −σx`, in the overflow-free form.
#[inline]
pub(super) fn logistic(x: f32, sigma: f32) -> (f32, f32) {
    let z = -sigma * x;
    let e = (-z.abs()).exp();
    let softplus = z.max(0.0) + e.ln_1p();
    let sigmoid = if z >= 0.0 {
        1.0 / (1.0 + e)
    } else {
        e / (1.0 + e)
    };
    (softplus, sigmoid)
}

/// Hinge: the slope at the kink `x = m` is taken as 0.
#[inline]
pub(super) fn hinge(x: f32, margin: f32) -> (f32, f32) {
    if x < margin {
        (margin - x, 1.0)
    } else {
        (0.0, 0.0)
    }
}

#[inline]
pub(super) fn squared_hinge(x: f32, margin: f32) -> (f32, f32) {
    let h = (margin - x).max(0.0);
    (h * h, h)
}
