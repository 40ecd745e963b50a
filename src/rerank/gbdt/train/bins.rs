//! Feature histograms' bins (SPEC §3.6): at most `max_bins` quantile bins per feature plus
//! one bin for missing values (NaN), fitted on the training rows.
//!
//! Bin boundaries are thresholds of the model's own split form: bin `k` holds the values
//! `t_{k−1} < x ≤ t_k`, so a split "bins `0..=k` left" is the split `x ≤ t_k` and a row's
//! bin is `#{t : t < x}` — the same rule the compiled scorer uses. Each boundary lies
//! between two training values that are adjacent in sorted order (the largest `f32` not
//! above their midpoint), so training rows and new rows near them fall on the sides the
//! training saw.
//!
//! With at most `max_bins` distinct values, every value is its own bin. Otherwise bins are
//! filled greedily in sorted order with about `n / max_bins` rows each, and a value that
//! alone holds that many rows (the zeros of a sparse feature) gets a bin of its own.

/// One feature's bins.
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureBins {
    /// Upper bounds `t_0 < t_1 < …` of every regular bin but the last.
    pub thresholds: Vec<f32>,
    /// The largest training value (the last bin's upper bound; −∞ without values).
    pub upper: f32,
}

impl FeatureBins {
    /// Regular bins (the missing bin comes after them).
    pub fn regular(&self) -> usize {
        self.thresholds.len() + 1
    }

    /// The missing-value bin's index.
    pub fn missing(&self) -> usize {
        self.regular()
    }

    pub fn bin(&self, x: f32) -> u8 {
        if x.is_nan() {
            self.missing() as u8
        } else {
            self.thresholds.partition_point(|&t| t < x) as u8
        }
    }

    /// Fits the bins of one feature's values (NaN ignored).
    pub fn fit(values: &mut [f32], max_bins: usize) -> FeatureBins {
        let max_bins = max_bins.clamp(1, 255);
        let mut sorted: Vec<f32> = values.iter().copied().filter(|v| !v.is_nan()).collect();
        sorted.sort_by(f32::total_cmp);
        // Distinct values (−0 and +0 are one) with their counts.
        let mut distinct: Vec<(f32, usize)> = Vec::new();
        for v in sorted {
            match distinct.last_mut() {
                Some((last, count)) if *last == v => *count += 1,
                _ => distinct.push((v, 1)),
            }
        }
        let boundary = |a: f32, b: f32| {
            super::super::import::f32_at_or_below((f64::from(a) + f64::from(b)) / 2.0)
        };
        let upper = distinct.last().map_or(f32::NEG_INFINITY, |d| d.0);
        let mut thresholds = Vec::new();
        if distinct.len() <= max_bins {
            for w in distinct.windows(2) {
                thresholds.push(boundary(w[0].0, w[1].0));
            }
        } else {
            let total: usize = distinct.iter().map(|d| d.1).sum();
            let target = total.div_ceil(max_bins).max(1);
            let mut in_bin = 0usize;
            for k in 0..distinct.len() - 1 {
                let (v, count) = distinct[k];
                let next = distinct[k + 1];
                if thresholds.len() + 1 >= max_bins {
                    break;
                }
                // A heavy value starts a bin of its own.
                if in_bin > 0 && count >= target {
                    thresholds.push(boundary(distinct[k - 1].0, v));
                    in_bin = 0;
                    if thresholds.len() + 1 >= max_bins {
                        break;
                    }
                }
                in_bin += count;
                if in_bin >= target || next.1 >= target {
                    thresholds.push(boundary(v, next.0));
                    in_bin = 0;
                }
            }
        }
        FeatureBins { thresholds, upper }
    }
}

/// A training set's features as bins: column-major `u8` (one column per feature).
#[derive(Debug, Clone)]
pub struct Binned {
    pub rows: usize,
    pub features: Vec<FeatureBins>,
    /// `bins[f * rows + r]`.
    pub bins: Vec<u8>,
    /// Per feature, its most frequent bin (the zeros of a sparse feature): histograms skip
    /// it and take its sums as the leaf's minus the other bins' (LightGBM's `most_freq_bin`).
    pub most_frequent: Vec<u8>,
    /// Per feature, whether its most frequent bin holds most rows (at least
    /// [`SPARSE_SHARE`]): histograms then branch around it, else go branch-free.
    pub sparse: Vec<bool>,
}

/// The share of rows in a feature's most frequent bin from which it counts as sparse.
pub const SPARSE_SHARE: f64 = 0.8;

impl Binned {
    /// Fits and applies the bins of a row-major `rows × d` matrix.
    pub fn new(x: &[f32], d: usize, max_bins: usize) -> Binned {
        use rayon::prelude::*;
        let rows = x.len().checked_div(d).unwrap_or(0);
        let columns: Vec<(FeatureBins, Vec<u8>)> = (0..d)
            .into_par_iter()
            .map(|f| {
                let mut column: Vec<f32> = (0..rows).map(|r| x[r * d + f]).collect();
                let fb = FeatureBins::fit(&mut column, max_bins);
                let bins = column.iter().map(|&v| fb.bin(v)).collect();
                (fb, bins)
            })
            .collect();
        let mut features = Vec::with_capacity(d);
        let mut bins = Vec::with_capacity(d * rows);
        let mut most_frequent = Vec::with_capacity(d);
        let mut sparse = Vec::with_capacity(d);
        for (fb, column) in columns {
            let mut counts = [0usize; 256];
            for &b in &column {
                counts[usize::from(b)] += 1;
            }
            // The lowest of the most frequent bins.
            let top = (0..256).rev().max_by_key(|&b| counts[b]).unwrap_or(0);
            most_frequent.push(top as u8);
            sparse.push(counts[top] as f64 >= SPARSE_SHARE * rows as f64);
            features.push(fb);
            bins.extend(column);
        }
        Binned {
            rows,
            features,
            bins,
            most_frequent,
            sparse,
        }
    }

    pub fn column(&self, f: usize) -> &[u8] {
        &self.bins[f * self.rows..(f + 1) * self.rows]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_values_get_a_bin_each() {
        let mut v = vec![0.0, 1.0, 0.0, -0.0, 2.0, f32::NAN, 1.0];
        let fb = FeatureBins::fit(&mut v, 255);
        assert_eq!(fb.thresholds, [0.5, 1.5]);
        let bins: Vec<u8> = v.iter().map(|&x| fb.bin(x)).collect();
        assert_eq!(bins, [0, 1, 0, 0, 2, 3, 1]);
        // A value exactly on a boundary belongs to the lower bin (x ≤ t).
        assert_eq!(fb.bin(0.5), 0);
        assert_eq!(fb.bin(0.5f32.next_up()), 1);
        assert_eq!(fb.missing(), 3);
        // A constant feature has one bin and no threshold.
        assert!(FeatureBins::fit(&mut [3.0, 3.0], 255).thresholds.is_empty());
    }

    #[test]
    fn many_values_are_quantiles_with_heavy_values_alone() {
        // 600 zeros, then 1..=400 once each: zero has a bin of its own, the rest ~equal.
        let mut v: Vec<f32> = std::iter::repeat_n(0.0, 600)
            .chain((1..=400).map(|i| i as f32))
            .collect();
        let fb = FeatureBins::fit(&mut v, 10);
        assert!(fb.regular() <= 10, "{:?}", fb.thresholds);
        assert_eq!(fb.thresholds[0], 0.5, "zero alone in bin 0");
        let mut counts = vec![0usize; fb.regular()];
        for &x in &v {
            counts[usize::from(fb.bin(x))] += 1;
        }
        assert_eq!(counts[0], 600);
        for &c in &counts[1..counts.len() - 1] {
            assert!((50..=150).contains(&c), "{counts:?}");
        }
        // Thresholds strictly increase and separate adjacent training values.
        assert!(fb.thresholds.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn boundaries_separate_adjacent_floats() {
        let a = 1.0f32;
        let b = a.next_up();
        let fb = FeatureBins::fit(&mut [a, b], 255);
        assert_eq!(fb.thresholds, [a]);
        assert_eq!((fb.bin(a), fb.bin(b)), (0, 1));
    }
}
