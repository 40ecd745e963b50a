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
//! The boundaries are LightGBM's (`BinMapper::FindBin` with `FindBinWithZeroAsOneBin` and
//! `GreedyFindBin`, src/io/bin.cpp), so that a parity run against LightGBM splits on the same
//! candidate thresholds (docs/EVALUATION.md "Gradient-boosted trees"):
//! - zero (|x| ≤ 1e-35) is a bin of its own, with the negative values below it and the
//!   positive values above it binned separately, the negative side given a share of the bins
//!   proportional to its rows;
//! - on each side, with at most as many distinct values as bins, a bin closes once it holds
//!   `min_data_in_bin` rows (1: every value its own bin);
//! - otherwise a value holding at least the mean bin size (rows / bins) is a bin of its own,
//!   and the others fill bins of about the mean size of what is left, in sorted order.
//!
//! Only the boundaries' rounding is rankd's own: `f32`, the largest not above the midpoint of
//! the two values, where LightGBM takes the `f64` just above it.

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
    pub fn fit(values: &[f32], max_bins: usize, min_data_in_bin: usize) -> FeatureBins {
        let max_bins = max_bins.clamp(1, 255);
        let mut sorted: Vec<f32> = values.iter().copied().filter(|v| !v.is_nan()).collect();
        sorted.sort_by(f32::total_cmp);
        // Distinct values with their counts; every |x| ≤ ZERO is the one value 0.
        let mut distinct: Vec<(f64, usize)> = Vec::new();
        for v in sorted {
            let v = if v.abs() <= ZERO { 0.0 } else { f64::from(v) };
            match distinct.last_mut() {
                Some((last, count)) if *last == v => *count += 1,
                _ => distinct.push((v, 1)),
            }
        }
        let upper = distinct.last().map_or(f32::NEG_INFINITY, |d| d.0 as f32);
        let bounds = zero_as_one_bin(&distinct, max_bins, min_data_in_bin);
        // Every bound but the last (+∞) as an f32 threshold, strictly increasing.
        let mut thresholds: Vec<f32> = Vec::with_capacity(bounds.len());
        for b in &bounds[..bounds.len().saturating_sub(1)] {
            let t = super::super::import::f32_at_or_below(*b);
            if thresholds.last().is_none_or(|&last| last < t) {
                thresholds.push(t);
            }
        }
        FeatureBins { thresholds, upper }
    }
}

/// LightGBM's `kZeroThreshold`: values this close to zero are zero.
const ZERO: f32 = 1e-35;

/// The upper bounds of the bins of `distinct` (sorted, with counts), the last one +∞: zero's
/// bin between the negative and the positive values' (`FindBinWithZeroAsOneBin`).
fn zero_as_one_bin(distinct: &[(f64, usize)], max_bins: usize, min_data_in_bin: usize) -> Vec<f64> {
    let zero = f64::from(ZERO);
    let total: usize = distinct.iter().map(|d| d.1).sum();
    let count = |part: &[(f64, usize)]| part.iter().map(|d| d.1).sum::<usize>();
    let left = distinct.partition_point(|d| d.0 <= -zero);
    let right = distinct.partition_point(|d| d.0 <= zero);
    let zeros = count(&distinct[left..right]);
    let mut bounds = Vec::new();
    if left > 0 && max_bins > 1 {
        let rows = count(&distinct[..left]);
        let share = (rows as f64 / (total - zeros) as f64 * (max_bins - 1) as f64) as usize;
        bounds = greedy(&distinct[..left], share.max(1), min_data_in_bin);
        if let Some(last) = bounds.last_mut() {
            *last = -zero;
        }
    }
    let right_bins = (max_bins - 1).saturating_sub(bounds.len());
    if right < distinct.len() && right_bins > 0 {
        bounds.push(zero);
        bounds.extend(greedy(&distinct[right..], right_bins, min_data_in_bin));
    } else {
        bounds.push(f64::INFINITY);
    }
    bounds
}

/// The upper bounds of at most `max_bins` bins over `distinct` (sorted, with counts), the last
/// one +∞ (`GreedyFindBin`).
fn greedy(distinct: &[(f64, usize)], max_bins: usize, min_data_in_bin: usize) -> Vec<f64> {
    let n = distinct.len();
    let total: usize = distinct.iter().map(|d| d.1).sum();
    let midpoint = |a: f64, b: f64| (a + b) / 2.0;
    let mut bounds: Vec<f64> = Vec::new();
    if n <= max_bins {
        let mut in_bin = 0;
        for i in 0..n - 1 {
            in_bin += distinct[i].1;
            if in_bin >= min_data_in_bin {
                let b = midpoint(distinct[i].0, distinct[i + 1].0);
                if bounds.last().is_none_or(|&last| last < b) {
                    bounds.push(b);
                    in_bin = 0;
                }
            }
        }
        bounds.push(f64::INFINITY);
        return bounds;
    }
    let max_bins = match min_data_in_bin {
        0 => max_bins,
        m => max_bins.min(total / m).max(1),
    };
    let mut mean = total as f64 / max_bins as f64;
    let big: Vec<bool> = distinct.iter().map(|d| d.1 as f64 >= mean).collect();
    let mut rest_bins = max_bins - big.iter().filter(|&&b| b).count();
    let mut rest_rows = total
        - distinct
            .iter()
            .zip(&big)
            .filter(|(_, &b)| b)
            .map(|(d, _)| d.1)
            .sum::<usize>();
    mean = rest_rows as f64 / rest_bins as f64;
    // (last value of the bin, first value of the next) at each cut.
    let mut cuts: Vec<(f64, f64)> = Vec::new();
    let mut in_bin = 0;
    for i in 0..n - 1 {
        if !big[i] {
            rest_rows -= distinct[i].1;
        }
        in_bin += distinct[i].1;
        let in_bin_f = in_bin as f64;
        if big[i] || in_bin_f >= mean || (big[i + 1] && in_bin_f >= (mean * 0.5).max(1.0)) {
            cuts.push((distinct[i].0, distinct[i + 1].0));
            if cuts.len() + 1 >= max_bins {
                break;
            }
            in_bin = 0;
            if !big[i] {
                rest_bins = rest_bins.saturating_sub(1);
                mean = rest_rows as f64 / rest_bins as f64;
            }
        }
    }
    for (a, b) in cuts {
        let b = midpoint(a, b);
        if bounds.last().is_none_or(|&last| last < b) {
            bounds.push(b);
        }
    }
    bounds.push(f64::INFINITY);
    bounds
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
pub(crate) const SPARSE_SHARE: f64 = 0.8;

impl Binned {
    /// Fits and applies the bins of a row-major `rows × d` matrix.
    pub fn new(x: &[f32], d: usize, max_bins: usize, min_data_in_bin: usize) -> Binned {
        use rayon::prelude::*;
        let rows = x.len().checked_div(d).unwrap_or(0);
        let columns: Vec<(FeatureBins, Vec<u8>)> = (0..d)
            .into_par_iter()
            .map(|f| {
                let column: Vec<f32> = (0..rows).map(|r| x[r * d + f]).collect();
                let fb = FeatureBins::fit(&column, max_bins, min_data_in_bin);
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
        let v = [0.0, 1.0, 0.0, -0.0, 2.0, f32::NAN, 1.0];
        let fb = FeatureBins::fit(&v, 255, 1);
        // Zero's bin ends at 1e-35 (LightGBM's kZeroThreshold), then a bin per value.
        assert_eq!(fb.thresholds, [1e-35, 1.5]);
        let bins: Vec<u8> = v.iter().map(|&x| fb.bin(x)).collect();
        assert_eq!(bins, [0, 1, 0, 0, 2, 3, 1]);
        // A value exactly on a boundary belongs to the lower bin (x ≤ t).
        assert_eq!(fb.bin(1.5), 1);
        assert_eq!(fb.bin(1.5f32.next_up()), 2);
        assert_eq!(fb.missing(), 3);
        // With min_data_in_bin 3, 1 (two rows) and 2 (one row) share a bin.
        assert_eq!(FeatureBins::fit(&v, 255, 3).thresholds, [1e-35]);
        // A constant feature (zero, or not) has no threshold to split on but zero's.
        assert!(FeatureBins::fit(&[0.0, -0.0], 255, 1).thresholds.is_empty());
        assert_eq!(FeatureBins::fit(&[3.0, 3.0], 255, 1).thresholds, [1e-35]);
    }

    #[test]
    fn negative_values_get_bins_below_zero() {
        // -3, -2, -1 five times each, ten zeros, 1 and 2 five times each.
        let v: Vec<f32> = [-3.0, -2.0, -1.0, 1.0, 2.0]
            .iter()
            .flat_map(|&x| std::iter::repeat_n(x, 5))
            .chain(std::iter::repeat_n(0.0, 10))
            .collect();
        let fb = FeatureBins::fit(&v, 255, 3);
        assert_eq!(fb.thresholds, [-2.5, -1.5, -1e-35, 1e-35, 1.5]);
        assert_eq!(fb.bin(-1.0), 2);
        assert_eq!(fb.bin(0.0), 3);
        assert_eq!(fb.bin(1.0), 4);
        assert_eq!(fb.bin(2.0), 5);
    }

    #[test]
    fn many_values_are_quantiles_with_heavy_values_alone() {
        // 600 zeros, then 1..=400 once each: zero has a bin of its own, the rest ~equal.
        let v: Vec<f32> = std::iter::repeat_n(0.0, 600)
            .chain((1..=400).map(|i| i as f32))
            .collect();
        let fb = FeatureBins::fit(&v, 10, 3);
        assert!(fb.regular() <= 10, "{:?}", fb.thresholds);
        assert_eq!(fb.thresholds[0], 1e-35, "zero alone in bin 0");
        let mut counts = vec![0usize; fb.regular()];
        for &x in &v {
            counts[usize::from(fb.bin(x))] += 1;
        }
        assert_eq!(counts[0], 600);
        for &c in &counts[1..] {
            assert!((40..=50).contains(&c), "{counts:?}");
        }
        // Thresholds strictly increase and separate adjacent training values.
        assert!(fb.thresholds.windows(2).all(|w| w[0] < w[1]));
        // A value holding a bin's worth of rows alone is a bin of its own.
        let heavy: Vec<f32> = (1..=400)
            .map(|i| i as f32)
            .chain(std::iter::repeat_n(200.0, 100))
            .collect();
        let fb = FeatureBins::fit(&heavy, 10, 3);
        let b = fb.bin(200.0);
        assert!(
            fb.bin(199.0) < b && fb.bin(201.0) > b,
            "{:?}",
            fb.thresholds
        );
    }

    #[test]
    fn boundaries_separate_adjacent_floats() {
        let a = 1.0f32;
        let b = a.next_up();
        let fb = FeatureBins::fit(&[a, b], 255, 1);
        assert_eq!(fb.thresholds, [1e-35, a]);
        assert_eq!((fb.bin(a), fb.bin(b)), (1, 2));
    }

    /// The oracle: on real data, every training value of every feature of the LightGBM LETOR
    /// example's rank.train falls in the bin LightGBM 4.7 puts it in (max_bin 255,
    /// min_data_in_bin 3; tests/fixtures/gbdt/lightgbm_bins.json, written by
    /// bench/gbdt_parity_fixtures.py from LightGBM's own dump of its dataset).
    #[test]
    fn bins_equal_lightgbm_on_the_letor_example() {
        let fixture = crate::rerank::testutil::parity_fixture("lightgbm_bins.json");
        let set = crate::rerank::testutil::rank_train();
        let rows: Vec<_> = set.queries.iter().flat_map(|q| &q.rows).collect();
        // columns[k]: the values of file index k (LightGBM's column k), zero where absent.
        let mut columns = vec![vec![0f32; rows.len()]; set.num_features + 1];
        for (r, row) in rows.iter().enumerate() {
            for &(k, v) in &row.features {
                columns[k as usize][r] = v as f32;
            }
        }
        let features = fixture["features"].as_object().unwrap();
        let (mut compared, mut used) = (0, 0);
        for (k, column) in columns.iter().enumerate() {
            let fb = FeatureBins::fit(column, 255, 3);
            let ours: Vec<u8> = column.iter().map(|&x| fb.bin(x)).collect();
            let Some(bins) = features.get(&k.to_string()) else {
                // LightGBM keeps no feature with a single bin: neither can rankd split it.
                assert!(ours.iter().all(|&b| b == ours[0]), "feature {k}: {fb:?}");
                continue;
            };
            used += 1;
            let bins: Vec<(u8, f64)> = bins
                .as_array()
                .unwrap()
                .iter()
                .map(|p| (p[0].as_u64().unwrap() as u8, p[1].as_f64().unwrap()))
                .collect();
            for (r, &x) in column.iter().enumerate() {
                let value = rows[r]
                    .features
                    .iter()
                    .find(|f| f.0 as usize == k)
                    .map_or(0.0, |f| f.1);
                let theirs = bins.iter().find(|b| value <= b.1).unwrap().0;
                assert_eq!(ours[r], theirs, "feature {k}, row {r}, value {x}: {fb:?}");
                compared += 1;
            }
        }
        assert_eq!(used, features.len());
        assert!(compared > 600_000, "{compared}");

        // Many distinct values (GreedyFindBin's other branch): the fixture's synthetic rows.
        let synthetic = &fixture["synthetic"];
        let rows: Vec<Vec<f32>> = synthetic["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let r = r.as_array().unwrap();
                r.iter().map(|v| v.as_f64().unwrap() as f32).collect()
            })
            .collect();
        let theirs: Vec<Vec<u64>> = synthetic["bins"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                r.as_array()
                    .unwrap()
                    .iter()
                    .map(|b| b.as_u64().unwrap())
                    .collect()
            })
            .collect();
        for f in 0..rows[0].len() {
            let column: Vec<f32> = rows.iter().map(|r| r[f]).collect();
            let fb = FeatureBins::fit(&column, 255, 3);
            assert!(fb.regular() > 200, "feature {f}: {} bins", fb.regular());
            for (r, &x) in column.iter().enumerate() {
                assert_eq!(
                    u64::from(fb.bin(x)),
                    theirs[r][f],
                    "synthetic feature {f}, row {r}, value {x}: {fb:?}"
                );
            }
        }
    }
}
