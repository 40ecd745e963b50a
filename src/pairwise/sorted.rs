//! The exact O((n⁺ + n⁻) log n) one-sided Huber loss and gradient (SPEC §7, ℓ from §3.3).
//!
//! ℓ is piecewise polynomial in `x = p − s`, so for a fixed positive p the sum over all
//! negatives only needs, per piece, the count and the sums of `s` and `s²` of the negatives
//! in it: sort the negatives once and keep prefix sums; visiting the positives in ascending
//! order, the two piece boundaries only move forward, so one sweep finds them all. The same
//! trick with the roles swapped (prefix sums of `v` and `v·p` over the sorted positives)
//! gives the gradient of every negative. Sorting dominates: O((n⁺ + n⁻) log n). All f64.
//!
//! Accuracy: a difference of two prefix sums carries an error of about ε·(prefix size), so
//! one far outlier (say −3e5 among scores near 0 with τ = 0.01) would swamp the quadratic
//! piece, whose terms are at most 1. The quadratic window has width τ, so it never spans a
//! gap of 2τ or more between consecutive sorted values (2τ leaves room for rounding): its
//! prefix sums restart at every such gap ("segments") and are centred on the segment's first value. The linear piece (terms
//! ≥ 1 each) uses global prefix sums centred on the median.

/// Sorted values with, per weight `w` (1 for negatives, v for positives) and `u = value −
/// centre`, global prefix sums of `w` and `w·u`, and per-segment inclusive running sums of
/// `w`, `w·u'` and `w·u'²` with `u'` centred on the segment's first value.
struct Prefix {
    values: Vec<f64>,
    /// `order[k]` = index in the caller's slice of the k-th smallest value.
    order: Vec<usize>,
    centre: f64,
    /// `sum0[k]`, `sum1[k]`: Σ of `w`, `w·u` over the first k sorted values.
    sum0: Vec<f64>,
    sum1: Vec<f64>,
    /// Index of the first value of the segment each value belongs to.
    segment_start: Vec<usize>,
    /// Inclusive running sums within the segment: `[Σw, Σw·u', Σw·u'²]`.
    local: Vec<[f64; 3]>,
}

/// Counts and moments of a run of sorted values: `Σw`, `Σw·(s − origin)`, `Σw·(s − origin)²`.
struct Moments {
    w: f64,
    wu: f64,
    wuu: f64,
    origin: f64,
}

impl Prefix {
    fn new(values: &[f32], weights: Option<&[f32]>, gap: f64) -> Prefix {
        let order = sorted_order(values);
        let sorted: Vec<f64> = order.iter().map(|&k| f64::from(values[k])).collect();
        let centre = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
        let n = sorted.len();
        let (mut sum0, mut sum1) = (vec![0.0; n + 1], vec![0.0; n + 1]);
        let mut segment_start = vec![0; n];
        let mut local = vec![[0.0; 3]; n];
        for (k, (&value, &original)) in sorted.iter().zip(&order).enumerate() {
            let w = weights.map_or(1.0, |w| f64::from(w[original]));
            sum0[k + 1] = sum0[k] + w;
            sum1[k + 1] = sum1[k] + w * (value - centre);
            let continues = k > 0 && value - sorted[k - 1] < gap;
            segment_start[k] = if continues { segment_start[k - 1] } else { k };
            let u = value - sorted[segment_start[k]];
            let before = if continues { local[k - 1] } else { [0.0; 3] };
            local[k] = [before[0] + w, before[1] + w * u, before[2] + w * u * u];
        }
        Prefix {
            values: sorted,
            order,
            centre,
            sum0,
            sum1,
            segment_start,
            local,
        }
    }

    /// Moves `cursor` forward past the sorted values for which `pred` holds. The sweeps
    /// below visit the other side in ascending order, so every piece boundary only moves
    /// forward and a whole pass costs O(n⁺ + n⁻) after sorting.
    fn advance(&self, cursor: &mut usize, pred: impl Fn(f64) -> bool) {
        while *cursor < self.values.len() && pred(self.values[*cursor]) {
            *cursor += 1;
        }
    }

    fn range(sums: &[f64], from: usize, to: usize) -> f64 {
        sums[to] - sums[from]
    }

    /// Moments of the sorted run `[from, to)`, which must lie within one segment (true for
    /// any run of values narrower than the gap).
    fn window(&self, from: usize, to: usize) -> Moments {
        if from >= to {
            return Moments {
                w: 0.0,
                wu: 0.0,
                wuu: 0.0,
                origin: 0.0,
            };
        }
        let first = self.segment_start[to - 1];
        debug_assert!(first <= from, "window crosses a segment boundary");
        let end = self.local[to - 1];
        let before = if from > first {
            self.local[from - 1]
        } else {
            [0.0; 3]
        };
        Moments {
            w: end[0] - before[0],
            wu: end[1] - before[1],
            wuu: end[2] - before[2],
            origin: self.values[first],
        }
    }
}

pub(super) fn huber_loss_grad(
    pos: &[f32],
    neg: &[f32],
    v: &[f32],
    tau: f32,
    grad_pos: &mut [f64],
    grad_neg: &mut [f64],
) -> f64 {
    let tau = f64::from(tau);
    let n_neg = neg.len();

    // Per positive p, negatives sorted ascending fall into three runs:
    // [0, zero_end): x = p − s ≥ τ, ℓ = 0;  [zero_end, lin_start): 0 ≤ x < τ, ℓ = (1 − x/τ)²;
    // [lin_start, n): x < 0, ℓ = 1 − 2x/τ.
    let negs = Prefix::new(neg, None, 2.0 * tau);
    let poss = Prefix::new(pos, Some(v), 2.0 * tau);
    let mut total = 0.0;
    let (mut zero_end, mut lin_start) = (0, 0);
    for (&p, &i) in poss.values.iter().zip(&poss.order) {
        negs.advance(&mut zero_end, |s| p - s >= tau);
        negs.advance(&mut lin_start, |s| p - s >= 0.0);
        let vi = f64::from(v[i]);
        if vi == 0.0 {
            grad_pos[i] = 0.0;
            continue;
        }

        // Linear run: Σ (1 − 2(p − s)/τ) with s = c + u.
        let lin_n = (n_neg - lin_start) as f64;
        let lin_u = Prefix::range(&negs.sum1, lin_start, n_neg);
        let lin = lin_n * (1.0 - 2.0 * (p - negs.centre) / tau) + 2.0 / tau * lin_u;

        // Quadratic run: Σ (τ − x)²/τ² with τ − x = b + u', b = τ − p + origin. Each term
        // is ≥ 0; rounding can leave a tiny negative sum, hence the clamp.
        let q = negs.window(zero_end, lin_start);
        let b = tau - p + q.origin;
        let quad = ((q.w * b * b + 2.0 * b * q.wu + q.wuu) / (tau * tau)).max(0.0);
        let quad_slope = (q.w * b + q.wu).max(0.0);

        total += vi * (lin + quad);
        // ℓ'(x) = −2/τ on the linear run, −2(τ − x)/τ² on the quadratic run.
        grad_pos[i] = vi * (-2.0 / tau * lin_n - 2.0 / (tau * tau) * quad_slope);
    }

    // Per negative s, positives sorted ascending: [0, lin_end): x < 0; [lin_end, quad_end):
    // 0 ≤ x < τ; the rest contribute nothing. ∂/∂s ℓ(p − s) = −ℓ'(x).
    let (mut lin_end, mut quad_end) = (0, 0);
    for (&s, &j) in negs.values.iter().zip(&negs.order) {
        poss.advance(&mut lin_end, |p| p - s < 0.0);
        poss.advance(&mut quad_end, |p| p - s < tau);
        let lin_v = Prefix::range(&poss.sum0, 0, lin_end);
        // Σ v (τ − p + s) over the quadratic run, with p = origin + u'.
        let q = poss.window(lin_end, quad_end);
        let quad_slope = ((tau + s - q.origin) * q.w - q.wu).max(0.0);
        grad_neg[j] = 2.0 / tau * lin_v + 2.0 / (tau * tau) * quad_slope;
    }
    total
}

/// Indices of `values` in ascending order, via packed `(order-preserving key, index)`
/// integers: an LSD radix sort on the key bytes (the sort dominates this algorithm's time,
/// and radix beats comparison sorting from a few hundred values up).
fn sorted_order(values: &[f32]) -> Vec<usize> {
    let mut packed: Vec<u64> = values
        .iter()
        .enumerate()
        .map(|(k, &value)| (u64::from(order_key(value)) << 32) | k as u64)
        .collect();
    if packed.len() < 256 {
        packed.sort_unstable();
    } else {
        radix_sort_keys(&mut packed);
    }
    packed.iter().map(|&p| (p & 0xffff_ffff) as usize).collect()
}

/// Stable LSD radix sort of packed values by their upper 32 bits, one byte per pass; a pass
/// whose byte is the same for every value is skipped. Inputs arrive in index order, so
/// equal keys stay in index order and the result equals a full sort of the packed values.
fn radix_sort_keys(packed: &mut Vec<u64>) {
    const SHIFTS: [u32; 4] = [32, 40, 48, 56];
    let byte = |p: u64, shift: u32| ((p >> shift) & 0xff) as usize;
    // All four histograms in one read of the data.
    let mut counts = [[0usize; 256]; 4];
    for &p in packed.iter() {
        for (count, &shift) in counts.iter_mut().zip(&SHIFTS) {
            count[byte(p, shift)] += 1;
        }
    }
    let mut spare = vec![0u64; packed.len()];
    for (count, &shift) in counts.iter().zip(&SHIFTS) {
        if count.contains(&packed.len()) {
            continue;
        }
        let mut start = [0usize; 256];
        let mut offset = 0;
        for (slot, &c) in start.iter_mut().zip(count) {
            *slot = offset;
            offset += c;
        }
        for &p in packed.iter() {
            let b = byte(p, shift);
            spare[start[b]] = p;
            start[b] += 1;
        }
        std::mem::swap(packed, &mut spare);
    }
}

/// A u32 whose unsigned order is the numeric order of finite f32 (−0.0 just below +0.0).
fn order_key(value: f32) -> u32 {
    let bits = value.to_bits();
    if bits >> 31 == 1 {
        !bits
    } else {
        bits | 0x8000_0000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The radix path against a comparison sort, with ties, ±0 and both signs.
    #[test]
    fn radix_order_equals_comparison_order() {
        let values: Vec<f32> = (0..5000)
            .map(|k| match k % 7 {
                0 => 0.0,
                1 => -0.0,
                2 => -(k as f32) * 1e3,
                _ => ((k * 7919) % 1013) as f32 / 97.0 - 5.0,
            })
            .collect();
        let mut want: Vec<usize> = (0..values.len()).collect();
        want.sort_by(|&a, &b| values[a].total_cmp(&values[b]).then(a.cmp(&b)));
        assert_eq!(sorted_order(&values), want);
    }
}
