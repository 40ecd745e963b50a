//! Feature normalisation, fitted on training rows and stored in the model (SPEC §3.2).
//!
//! Both kinds are the affine map `norm(x)_i = (x_i − shift_i) · scale_i`, so one struct and
//! one loop serve both; only the fitting differs. A constant feature (zero spread) gets
//! `scale = 0`: it normalises to 0 and contributes nothing, instead of dividing by zero.

use aligned_vec::AVec;
use serde::{Deserialize, Serialize};

use super::RerankError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum NormKind {
    /// `(x − mean) / std` (population std).
    #[value(name = "zscore")]
    ZScore,
    /// `(x − min) / (max − min)`, so training values land in [0, 1].
    #[value(name = "minmax")]
    MinMax,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Normalizer {
    pub kind: NormKind,
    pub shift: Vec<f32>,
    pub scale: Vec<f32>,
}

impl Normalizer {
    /// Fits on a row-major `n × d` matrix (statistics in f64).
    pub fn fit(kind: NormKind, x: &[f32], d: usize) -> Result<Self, RerankError> {
        if d == 0 || x.is_empty() || !x.len().is_multiple_of(d) {
            return Err(RerankError::invalid(format!(
                "cannot fit a normalisation on {} values with {d} features",
                x.len()
            )));
        }
        let n = x.len() / d;
        let column = |j: usize| x.iter().skip(j).step_by(d).map(|&v| f64::from(v));
        let (shift, scale) = (0..d)
            .map(|j| match kind {
                NormKind::ZScore => {
                    let mean = column(j).sum::<f64>() / n as f64;
                    let var = column(j).map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
                    (mean, inverse_spread(var.sqrt(), mean))
                }
                NormKind::MinMax => {
                    let (lo, hi) = column(j)
                        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                            (a.min(v), b.max(v))
                        });
                    (lo, inverse_spread(hi - lo, lo))
                }
            })
            .map(|(s, c)| (s as f32, c as f32))
            .unzip();
        Ok(Normalizer { kind, shift, scale })
    }

    pub fn num_features(&self) -> usize {
        self.shift.len()
    }

    /// Normalises a row-major block (same length). The result is cache-line aligned for the
    /// scoring kernels: an unaligned 32-byte load that straddles two lines costs two L1
    /// reads, which halves block scoring's read rate when the block is in L1
    /// (docs/BENCHMARKS.md, pairwise core).
    pub fn apply(&self, x: &[f32]) -> AVec<f32> {
        let d = self.num_features();
        AVec::from_iter(
            0,
            x.chunks_exact(d).flat_map(|row| {
                row.iter()
                    .zip(self.shift.iter().zip(&self.scale))
                    .map(|(&v, (&s, &c))| (v - s) * c)
            }),
        )
    }

    /// Checks shapes and numbers of a normalisation read from a file.
    pub fn validate(&self, d: usize) -> Result<(), String> {
        if self.shift.len() != d || self.scale.len() != d {
            return Err(format!(
                "normalisation has {} shifts and {} scales for {d} features",
                self.shift.len(),
                self.scale.len()
            ));
        }
        for (what, values) in [("shift", &self.shift), ("scale", &self.scale)] {
            if let Some(i) = values.iter().position(|v| !v.is_finite()) {
                return Err(format!(
                    "normalisation {what}[{i}] is {}, expected a finite number",
                    values[i]
                ));
            }
        }
        Ok(())
    }
}

/// `1 / spread`, or 0 when the spread is zero relative to the values (a constant feature);
/// the relative test keeps f32 rounding noise of a constant column from becoming a huge scale.
fn inverse_spread(spread: f64, level: f64) -> f64 {
    if spread <= 1e-6 * level.abs().max(1e-30) || spread == 0.0 {
        0.0
    } else {
        1.0 / spread
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zscore_and_minmax_by_hand() {
        // Column 0: 1, 3 (mean 2, std 1); column 1 constant 5; column 2: -2, 6.
        let x = [1.0, 5.0, -2.0, 3.0, 5.0, 6.0];
        let z = Normalizer::fit(NormKind::ZScore, &x, 3).unwrap();
        let out = z.apply(&x);
        assert_eq!(&out[..], [-1.0, 0.0, -1.0, 1.0, 0.0, 1.0]);
        assert_eq!(out.as_ptr() as usize % 64, 0);
        let m = Normalizer::fit(NormKind::MinMax, &x, 3).unwrap();
        let out = m.apply(&x);
        assert_eq!(&out[..], [0.0, 0.0, 0.0, 1.0, 0.0, 1.0]);
        assert!(out.iter().all(|v| v.is_finite()));
        // A constant column with a value where f32 rounding could leave a tiny spread.
        let x = [0.1f32, 0.1, 0.1];
        let z = Normalizer::fit(NormKind::ZScore, &x, 1).unwrap();
        assert_eq!(z.scale, [0.0]);
    }
}
