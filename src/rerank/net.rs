//! The scoring networks of SPEC §3.2 over normalised features: a linear model
//! `f(x) = wᵀx + b` is the network with no hidden layer, an MLP has one or two hidden layers
//! (ReLU or tanh) and a linear output. One type, one forward and one backward pass for both.
//!
//! Parameters are one flat `f32` vector, layer after layer, each layer its weight matrix
//! (`out × in`, row-major: row k is unit k's weight vector) then its biases. A weight row is
//! exactly the `w` of [`crate::pairwise::score_block`], so each unit of a layer is one
//! block-scoring call over the layer's input (the linear model and the MLP's first layer run
//! on the SIMD kernel). Gradients are accumulated in f64.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::RerankError;
use crate::pairwise::score_block;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    Relu,
    Tanh,
}

impl Activation {
    fn apply(self, z: f32) -> f32 {
        match self {
            Activation::Relu => z.max(0.0),
            Activation::Tanh => z.tanh(),
        }
    }

    /// The derivative, written in terms of the activation's output `a` (both have one).
    fn derivative_from_output(self, a: f32) -> f64 {
        match self {
            Activation::Relu => f64::from(u8::from(a > 0.0)),
            Activation::Tanh => 1.0 - f64::from(a) * f64::from(a),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Net {
    /// Layer widths from input to output: `[d, 1]` linear, `[d, h, 1]` or `[d, h1, h2, 1]` MLP.
    pub layers: Vec<usize>,
    pub activation: Activation,
    pub params: Vec<f32>,
}

/// Hidden-layer outputs of one forward pass, kept for the backward pass.
pub struct Activations {
    hidden: Vec<Vec<f32>>,
}

impl Net {
    /// A network with freshly initialised parameters: a linear model starts at zero, an MLP
    /// with Glorot (tanh) or He (ReLU) uniform weights from a seeded ChaCha8 stream and zero
    /// biases.
    pub fn new(
        inputs: usize,
        hidden: &[usize],
        activation: Activation,
        seed: u64,
    ) -> Result<Self, RerankError> {
        if inputs == 0 || hidden.len() > 2 || hidden.contains(&0) {
            return Err(RerankError::invalid(format!(
                "a network needs at least one input and 0–2 hidden layers of at least one \
                 unit, got {inputs} inputs and hidden layers {hidden:?}"
            )));
        }
        let mut layers = vec![inputs];
        layers.extend_from_slice(hidden);
        layers.push(1);
        let mut net = Net {
            params: vec![0.0; Self::param_count(&layers)],
            layers,
            activation,
        };
        if !hidden.is_empty() {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut offset = 0;
            for l in 0..net.layers.len() - 1 {
                let (fan_in, fan_out) = (net.layers[l], net.layers[l + 1]);
                let limit = match activation {
                    Activation::Tanh => (6.0 / (fan_in + fan_out) as f64).sqrt(),
                    Activation::Relu => (6.0 / fan_in as f64).sqrt(),
                } as f32;
                for w in &mut net.params[offset..offset + fan_in * fan_out] {
                    *w = rng.random_range(-limit..limit);
                }
                offset += (fan_in + 1) * fan_out;
            }
        }
        Ok(net)
    }

    fn param_count(layers: &[usize]) -> usize {
        layers.windows(2).map(|w| (w[0] + 1) * w[1]).sum()
    }

    pub fn inputs(&self) -> usize {
        self.layers[0]
    }

    pub fn is_linear(&self) -> bool {
        self.layers.len() == 2
    }

    /// Hidden-layer widths (empty for the linear model).
    pub fn hidden(&self) -> &[usize] {
        &self.layers[1..self.layers.len() - 1]
    }

    /// `(fan_in, fan_out, offset of the layer's weights in params)` of each layer; its biases
    /// follow its `fan_in × fan_out` weights.
    fn layer_slices(&self) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        let mut offset = 0;
        self.layers.windows(2).map(move |w| {
            let at = offset;
            offset += (w[0] + 1) * w[1];
            (w[0], w[1], at)
        })
    }

    /// Scores `n` normalised rows (row-major `n × inputs`); also returns the hidden
    /// activations for [`Net::backward`].
    pub fn forward(&self, x: &[f32], n: usize) -> Result<(Vec<f32>, Activations), RerankError> {
        let mut hidden: Vec<Vec<f32>> = Vec::with_capacity(self.layers.len() - 2);
        let mut column = vec![0f32; n];
        let mut scores = Vec::new();
        for (l, (fan_in, fan_out, at)) in self.layer_slices().enumerate() {
            let input: &[f32] = if l == 0 { x } else { &hidden[l - 1] };
            let weights = &self.params[at..at + fan_in * fan_out];
            let biases = &self.params[at + fan_in * fan_out..at + (fan_in + 1) * fan_out];
            let last = l + 2 == self.layers.len();
            let mut out = vec![0f32; n * fan_out];
            for (k, w) in weights.chunks_exact(fan_in).enumerate() {
                score_block(input, n, fan_in, w, &mut column)?;
                for (r, &z) in column.iter().enumerate() {
                    let z = z + biases[k];
                    out[r * fan_out + k] = if last { z } else { self.activation.apply(z) };
                }
            }
            if last {
                scores = out;
            } else {
                hidden.push(out);
            }
        }
        if let Some(r) = scores.iter().position(|s| !s.is_finite()) {
            return Err(RerankError::invalid(format!(
                "row {r} scored {}: the network overflowed f32",
                scores[r]
            )));
        }
        Ok((scores, Activations { hidden }))
    }

    /// Scores only (serving).
    pub fn score(&self, x: &[f32], n: usize) -> Result<Vec<f32>, RerankError> {
        Ok(self.forward(x, n)?.0)
    }

    /// Adds `Σ_r dscore[r] · ∂score_r/∂θ` to `grad` (length = number of parameters):
    /// ordinary backpropagation through the layers of [`Net::forward`].
    pub fn backward(
        &self,
        x: &[f32],
        n: usize,
        acts: &Activations,
        dscore: &[f64],
        grad: &mut [f64],
    ) {
        let slices: Vec<(usize, usize, usize)> = self.layer_slices().collect();
        // delta: ∂loss/∂(pre-activation) of the current layer, row-major n × fan_out.
        let mut delta: Vec<f64> = dscore.to_vec();
        for l in (0..slices.len()).rev() {
            let (fan_in, fan_out, at) = slices[l];
            let input: &[f32] = if l == 0 { x } else { &acts.hidden[l - 1] };
            let (gw, rest) = grad[at..at + (fan_in + 1) * fan_out].split_at_mut(fan_in * fan_out);
            for r in 0..n {
                let row = &input[r * fan_in..(r + 1) * fan_in];
                for k in 0..fan_out {
                    let d = delta[r * fan_out + k];
                    if d == 0.0 {
                        continue;
                    }
                    rest[k] += d;
                    for (g, &a) in gw[k * fan_in..(k + 1) * fan_in].iter_mut().zip(row) {
                        *g += d * f64::from(a);
                    }
                }
            }
            if l == 0 {
                break;
            }
            let weights = &self.params[at..at + fan_in * fan_out];
            let mut below = vec![0f64; n * fan_in];
            for r in 0..n {
                for k in 0..fan_out {
                    let d = delta[r * fan_out + k];
                    if d == 0.0 {
                        continue;
                    }
                    let w = &weights[k * fan_in..(k + 1) * fan_in];
                    for (b, &wj) in below[r * fan_in..(r + 1) * fan_in].iter_mut().zip(w) {
                        *b += d * f64::from(wj);
                    }
                }
                for (b, &a) in below[r * fan_in..(r + 1) * fan_in]
                    .iter_mut()
                    .zip(row_of(input, r, fan_in))
                {
                    *b *= self.activation.derivative_from_output(a);
                }
            }
            delta = below;
        }
    }

    /// Indices of the weights (not biases) in the parameter vector: weight decay applies
    /// to these only, as usual.
    pub fn weight_mask(&self) -> Vec<bool> {
        let mut mask = Vec::with_capacity(self.params.len());
        for (fan_in, fan_out, _) in self.layer_slices() {
            mask.extend(std::iter::repeat_n(true, fan_in * fan_out));
            mask.extend(std::iter::repeat_n(false, fan_out));
        }
        mask
    }

    /// For the linear model, `w_i · x_i` per feature of one normalised row (their sum plus
    /// the bias is the score); `None` for an MLP, whose score does not split by feature.
    pub fn contributions(&self, row: &[f32]) -> Option<Vec<f32>> {
        if !self.is_linear() || row.len() != self.inputs() {
            return None;
        }
        Some(row.iter().zip(&self.params).map(|(x, w)| x * w).collect())
    }

    /// The linear model's bias (the part of the score no feature explains).
    pub fn linear_bias(&self) -> Option<f32> {
        self.is_linear().then(|| self.params[self.inputs()])
    }

    /// Checks a network read from a file: widths, parameter count, finite parameters.
    pub fn validate(&self) -> Result<(), String> {
        let l = &self.layers;
        if l.len() < 2 || l.len() > 4 || l.contains(&0) || l[l.len() - 1] != 1 {
            return Err(format!(
                "layer widths {l:?} are not [inputs, (hidden,) (hidden,) 1] with no zero width"
            ));
        }
        let expected = Self::param_count(l);
        if self.params.len() != expected {
            return Err(format!(
                "{} parameters for layers {l:?}, expected {expected}",
                self.params.len()
            ));
        }
        if let Some(i) = self.params.iter().position(|p| !p.is_finite()) {
            return Err(format!(
                "parameter {i} is {}, expected a finite number",
                self.params[i]
            ));
        }
        Ok(())
    }
}

/// Scores of an ensemble: the mean of its members' scores `g` (one member: its scores,
/// unchanged). Ranking by the mean is what averaging the members' votes means; the mean is
/// taken in f64.
pub(crate) fn ensemble_score(nets: &[Net], x: &[f32], n: usize) -> Result<Vec<f32>, RerankError> {
    if nets.is_empty() {
        return Err(RerankError::invalid(
            "an ensemble needs at least one network",
        ));
    }
    let scores = nets
        .iter()
        .map(|net| net.score(x, n))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(mean_params(scores.iter().map(Vec::as_slice)))
}

/// The mean of vectors of one length, in f64 (one vector: itself, unchanged). Used for
/// ensemble scores, for averaging the last epochs of a run, and for folding an ensemble of
/// linear models into one linear model (the mean of linear functions of the same input is
/// linear, with the mean weights and bias: the scores are the same up to rounding).
pub(crate) fn mean_params<'a>(mut params: impl ExactSizeIterator<Item = &'a [f32]>) -> Vec<f32> {
    let k = params.len();
    if k == 1 {
        return params.next().expect("one vector").to_vec();
    }
    let mut sum: Vec<f64> = Vec::new();
    for p in params {
        if sum.is_empty() {
            sum = vec![0.0; p.len()];
        }
        for (s, &v) in sum.iter_mut().zip(p) {
            *s += f64::from(v);
        }
    }
    sum.into_iter().map(|s| (s / k as f64) as f32).collect()
}

fn row_of(x: &[f32], r: usize, d: usize) -> &[f32] {
    &x[r * d..(r + 1) * d]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Oracle for the forward pass: a plain f64 MLP written from the definition.
    fn forward_f64(net: &Net, x: &[f32], n: usize) -> Vec<f64> {
        let mut input: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
        let mut offset = 0;
        for l in 0..net.layers.len() - 1 {
            let (fi, fo) = (net.layers[l], net.layers[l + 1]);
            let last = l + 2 == net.layers.len();
            let mut out = vec![0f64; n * fo];
            for r in 0..n {
                for k in 0..fo {
                    let mut z = f64::from(net.params[offset + fi * fo + k]);
                    for j in 0..fi {
                        z += f64::from(net.params[offset + k * fi + j]) * input[r * fi + j];
                    }
                    out[r * fo + k] = match (last, net.activation) {
                        (true, _) => z,
                        (false, Activation::Relu) => z.max(0.0),
                        (false, Activation::Tanh) => z.tanh(),
                    };
                }
            }
            input = out;
            offset += (fi + 1) * fo;
        }
        input
    }

    fn random_input(n: usize, d: usize, seed: u64) -> Vec<f32> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n * d).map(|_| rng.random_range(-1.5f32..1.5)).collect()
    }

    #[test]
    fn forward_matches_plain_f64() {
        for hidden in [vec![], vec![5], vec![4, 3]] {
            for act in [Activation::Relu, Activation::Tanh] {
                let mut net = Net::new(7, &hidden, act, 3).unwrap();
                let mut rng = ChaCha8Rng::seed_from_u64(9);
                for p in &mut net.params {
                    *p = rng.random_range(-0.8f32..0.8);
                }
                let x = random_input(11, 7, 5);
                let (s, _) = net.forward(&x, 11).unwrap();
                let oracle = forward_f64(&net, &x, 11);
                for (a, b) in s.iter().zip(&oracle) {
                    assert!(
                        (f64::from(*a) - b).abs() < 1e-5 * (1.0 + b.abs()),
                        "{a} vs {b}"
                    );
                }
            }
        }
    }

    /// Backward pass against central finite differences of the f64 oracle forward pass, for
    /// the functional `L = Σ_r c_r · score_r`. Step 1e-4 in f64: truncation error ~1e-8, far
    /// below the 1e-5 tolerance (the analytic side is f32 activations with f64 sums).
    #[test]
    fn backward_matches_finite_differences() {
        for hidden in [vec![], vec![6], vec![5, 4]] {
            for act in [Activation::Relu, Activation::Tanh] {
                let net = Net::new(4, &hidden, act, 17).unwrap();
                let n = 6;
                let x = random_input(n, 4, 23);
                let c: Vec<f64> = (0..n).map(|r| (r as f64 - 2.5) * 0.3).collect();
                let (_, acts) = net.forward(&x, n).unwrap();
                let mut grad = vec![0f64; net.params.len()];
                net.backward(&x, n, &acts, &c, &mut grad);
                let functional = |net: &Net| -> f64 {
                    forward_f64(net, &x, n)
                        .iter()
                        .zip(&c)
                        .map(|(s, c)| s * c)
                        .sum()
                };
                for (i, &backprop) in grad.iter().enumerate() {
                    let h = 1e-3f32;
                    let mut plus = net.clone();
                    plus.params[i] += h;
                    let mut minus = net.clone();
                    minus.params[i] -= h;
                    let step = f64::from(plus.params[i]) - f64::from(minus.params[i]);
                    let fd = (functional(&plus) - functional(&minus)) / step;
                    assert!(
                        (fd - backprop).abs() < 2e-4 * (1.0 + fd.abs()),
                        "{hidden:?} {act:?} param {i}: fd {fd} vs backprop {backprop}"
                    );
                }
            }
        }
    }

    #[test]
    fn ensemble_and_parameter_means_by_hand() {
        // Two linear members on one row (1, 2): scores 1·1 + 1·2 + 0 = 3 and
        // 3·1 − 1·2 + 1 = 2, mean 2.5; their mean parameters (2, 0, 0.5) score 2.5 too.
        let mut a = Net::new(2, &[], Activation::Relu, 0).unwrap();
        a.params = vec![1.0, 1.0, 0.0];
        let mut b = a.clone();
        b.params = vec![3.0, -1.0, 1.0];
        let row = [1.0, 2.0];
        let both = [a.clone(), b.clone()];
        assert_eq!(ensemble_score(&both, &row, 1).unwrap(), [2.5]);
        let mean = mean_params([a.params.as_slice(), b.params.as_slice()].into_iter());
        assert_eq!(mean, [2.0, 0.0, 0.5]);
        // One member: its own scores and parameters, bit for bit.
        let x = random_input(3, 2, 1);
        assert_eq!(
            ensemble_score(std::slice::from_ref(&b), &x, 3).unwrap(),
            b.score(&x, 3).unwrap()
        );
        assert_eq!(mean_params(std::iter::once(b.params.as_slice())), b.params);
        assert!(ensemble_score(&[], &row, 1).is_err());
    }

    #[test]
    fn contributions_sum_to_the_linear_score() {
        let mut net = Net::new(3, &[], Activation::Relu, 0).unwrap();
        net.params = vec![0.5, -2.0, 1.0, 0.25];
        let row = [2.0, 1.0, -3.0];
        let c = net.contributions(&row).unwrap();
        assert_eq!(c, [1.0, -2.0, -3.0]);
        let s = net.score(&row, 1).unwrap()[0];
        assert_eq!(s, c.iter().sum::<f32>() + net.linear_bias().unwrap());
        let mlp = Net::new(3, &[2], Activation::Tanh, 0).unwrap();
        assert!(mlp.contributions(&row).is_none());
    }
}
