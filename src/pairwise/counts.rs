//! Pair counts for ranking metrics (SPEC §7 item 3).

/// How the negatives of one query compare with one positive (or, summed, with all of them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PairCount {
    /// Negatives scoring strictly below the positive: correctly ordered pairs.
    pub below: u64,
    /// Negatives scoring exactly the same (`-0.0 == +0.0`).
    pub ties: u64,
}

impl PairCount {
    /// Correctly ordered pairs with ties counted ½: the AUC numerator (divide by n⁺·n⁻).
    pub fn auc_numerator(self) -> f64 {
        self.below as f64 + 0.5 * self.ties as f64
    }

    /// Negatives ranked above this positive among `n_neg`, ties counted ½: the term AP needs
    /// for this positive's rank, `rank = (positives at or above) + negatives_above`.
    pub fn negatives_above(self, n_neg: usize) -> f64 {
        n_neg as f64 - self.auc_numerator()
    }
}
