//! Stochastic unified momentum, SPEC §3.3 (seed 000 Algorithm 1 line 8, corrected):
//! ```text
//! γ_{k+1}   = θ_k − α·g_k
//! γ^s_{k+1} = θ_k − s·α·g_k
//! θ_{k+1}   = γ_{k+1} + β·(γ^s_{k+1} − γ^s_k)        (s = 1: Nesterov, s = 0: heavy ball)
//! ```
//! with `γ^s_1 = θ_1`, so the first step is plain gradient descent. Weight decay adds
//! `wd·θ` to the gradient of the weights (not the biases).

use serde::{Deserialize, Serialize};

/// Optimiser hyperparameters (stored in model files) and state. The hyperparameters are
/// the network settings' `lr`, `beta`, `momentum_s` and `weight_decay`, checked there
/// ([`NetworkParams::validate`](crate::rerank::NetworkParams::validate)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnifiedMomentum {
    /// Learning rate α.
    pub lr: f64,
    /// Momentum β.
    pub beta: f64,
    /// s ∈ [0, 1]: 1 Nesterov, 0 heavy ball.
    pub s: f64,
    pub weight_decay: f64,
    /// γ^s_k, the previous step's look-ahead point (empty until the first step).
    #[serde(skip)]
    gamma_s: Vec<f64>,
}

impl UnifiedMomentum {
    pub fn new(lr: f64, beta: f64, s: f64, weight_decay: f64) -> Self {
        UnifiedMomentum {
            lr,
            beta,
            s,
            weight_decay,
            gamma_s: Vec::new(),
        }
    }

    /// One step: `theta` ← θ_{k+1} given θ_k and the gradient g_k. `decay[i]` says whether
    /// parameter i gets weight decay.
    pub fn step(&mut self, theta: &mut [f32], grad: &[f64], decay: &[bool]) {
        if self.gamma_s.len() != theta.len() {
            self.gamma_s = theta.iter().map(|&t| f64::from(t)).collect();
        }
        for i in 0..theta.len() {
            let t = f64::from(theta[i]);
            let g = grad[i] + if decay[i] { self.weight_decay * t } else { 0.0 };
            let gamma = t - self.lr * g;
            let gamma_s = t - self.s * self.lr * g;
            theta[i] = (gamma + self.beta * (gamma_s - self.gamma_s[i])) as f32;
            self.gamma_s[i] = gamma_s;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three steps on one parameter, by hand from the SPEC recurrences.
    #[test]
    fn nesterov_and_heavy_ball_by_hand() {
        // s = 1, α = 0.1, β = 0.5, no decay; θ1 = 1, gradients 2, 1, -1.
        // k=1: γ2 = 1 − 0.2 = 0.8, γs2 = 0.8, θ2 = 0.8 + 0.5(0.8 − 1) = 0.7
        // k=2: γ3 = 0.7 − 0.1 = 0.6, γs3 = 0.6, θ3 = 0.6 + 0.5(0.6 − 0.8) = 0.5
        // k=3: γ4 = 0.5 + 0.1 = 0.6, θ4 = 0.6 + 0.5(0.6 − 0.6) = 0.6
        let mut opt = UnifiedMomentum::new(0.1, 0.5, 1.0, 0.0);
        let mut theta = [1.0f32];
        for (g, want) in [(2.0, 0.7), (1.0, 0.5), (-1.0, 0.6)] {
            opt.step(&mut theta, &[g], &[true]);
            assert!(
                (f64::from(theta[0]) - want).abs() < 1e-6,
                "{theta:?} vs {want}"
            );
        }
        // s = 0 (heavy ball): θ_{k+1} = θ_k − αg_k + β(θ_k − θ_{k−1}).
        // θ2 = 1 − 0.2 = 0.8; θ3 = 0.8 − 0.1 + 0.5(0.8 − 1) = 0.6; θ4 = 0.6 + 0.1 + 0.5(−0.2) = 0.6
        let mut opt = UnifiedMomentum::new(0.1, 0.5, 0.0, 0.0);
        let mut theta = [1.0f32];
        for (g, want) in [(2.0, 0.8), (1.0, 0.6), (-1.0, 0.6)] {
            opt.step(&mut theta, &[g], &[true]);
            assert!(
                (f64::from(theta[0]) - want).abs() < 1e-6,
                "{theta:?} vs {want}"
            );
        }
    }

    #[test]
    fn weight_decay_skips_biases() {
        // Zero gradient, decay 0.5, α = 1, β = 0: a weight shrinks by half, a bias stays.
        let mut opt = UnifiedMomentum::new(1.0, 0.0, 1.0, 0.5);
        let mut theta = [2.0f32, 2.0];
        opt.step(&mut theta, &[0.0, 0.0], &[true, false]);
        assert_eq!(theta, [1.0, 2.0]);
    }
}
