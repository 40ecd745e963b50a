//! The serving form of a [`Forest`]: flat arrays, integer bins, and block-at-a-time
//! traversal without data-dependent branches.
//!
//! **Bins.** For every feature the splits use, its distinct thresholds are sorted:
//! `u_0 < u_1 < … < u_{m−1}`. A value `x` gets the bin `b(x) = #{k : u_k < x}` (one binary
//! search per feature and document). For a split on `u_k`, `x ≤ u_k ⇔ b(x) ≤ k`: if
//! `x ≤ u_k` every `u_j < x` has `j < k`; if `x > u_k` then `u_0..u_k` are all below `x`. So
//! every node's float comparison becomes `b(x) > k` with exactly the same outcome — values
//! equal to a threshold included — and it is computed once per document and feature instead
//! of once per node.
//!
//! **Missing values.** A missing value must reach the side its node names, and nodes on the
//! same feature may name different sides. Each feature therefore has up to two bin columns
//! per kind of missing value (NaN; NaN or LightGBM's zero band, see
//! [`super::forest::ZERO_BAND`]): the *missing-right* column stores `b(x)` and `u16::MAX`
//! for a missing value (above every `k`), the *missing-left* column stores `b(x) + 1` and 0
//! for a missing value (below every `k + 1`); a node reads the column of its kind and side
//! and compares with `k` or `k + 1`. Still one comparison per node.
//!
//! **Traversal.** Nodes are 8 bytes (`column`, `bin threshold`, two `u16` children
//! relative to the tree), internal nodes first, then the leaves, which point to themselves:
//! a leaf is absorbing, so a block of documents walks a tree in lockstep for exactly the
//! tree's depth, `node = child[node][(bin > threshold) as usize]`, with no test for "reached
//! a leaf" and independent documents in flight at once. Leaf values are added in tree order
//! in `f64`, so scores equal [`Forest::predict_row`] bit for bit.
//!
//! This is the plain per-document walk made branch-free, not QuickScorer's bitvector
//! scheme. Limits (checked when compiling, with the offending tree or feature named): at
//! most 65 535 nodes per tree, 65 534 distinct thresholds per feature and 65 535 bin
//! columns.

use super::forest::{Forest, Node, ZERO_BAND};

/// Documents scored together: their bins (64 × columns × 2 bytes) and walk state stay in
/// the first-level cache for a few hundred features.
const BLOCK: usize = 64;
const MISSING_RIGHT_BIN: u16 = u16::MAX;
const MISSING_LEFT_BIN: u16 = 0;

/// Which bin column a split reads: bit 0 = missing goes left, bit 1 = the zero band is
/// missing too.
fn variant(nan_left: bool, zero_missing: bool) -> usize {
    usize::from(nan_left) | (usize::from(zero_missing) << 1)
}

#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C)]
struct FlatNode {
    column: u16,
    /// Go right iff the column's bin is above this.
    bin: u16,
    child: [u16; 2],
}

#[derive(Debug, Clone)]
struct FlatTree {
    /// Where the tree's nodes start in `nodes`.
    start: usize,
    internal: usize,
    len: usize,
    /// Where its leaf values start in `leaves`.
    leaf_start: usize,
    depth: usize,
}

/// A feature's sorted distinct thresholds and the columns that store its bins, by
/// [`variant`].
#[derive(Debug, Clone)]
struct FeatureBins {
    feature: usize,
    thresholds: Vec<f32>,
    columns: [Option<u16>; 4],
}

/// A forest compiled for scoring (see the module doc).
#[derive(Debug, Clone)]
pub struct CompiledForest {
    num_features: usize,
    base_score: f64,
    features: Vec<FeatureBins>,
    columns: usize,
    nodes: Vec<FlatNode>,
    leaves: Vec<f64>,
    trees: Vec<FlatTree>,
}

impl CompiledForest {
    /// Compiles a valid forest ([`Forest::validate`]); an error names the limit exceeded.
    pub fn new(forest: &Forest) -> Result<Self, String> {
        forest.validate()?;
        // Distinct thresholds per feature, and which NaN sides are used.
        let d = forest.num_features;
        let mut thresholds: Vec<Vec<f32>> = vec![Vec::new(); d];
        let mut used = vec![[false; 4]; d];
        for tree in &forest.trees {
            for node in &tree.nodes {
                if let Node::Split {
                    feature,
                    threshold,
                    nan_left,
                    zero_missing,
                    ..
                } = *node
                {
                    thresholds[feature as usize].push(threshold);
                    used[feature as usize][variant(nan_left, zero_missing)] = true;
                }
            }
        }
        let mut features = Vec::new();
        let mut columns = 0usize;
        let mut column_of = vec![[None; 4]; d];
        for (f, mut ts) in thresholds.into_iter().enumerate() {
            if ts.is_empty() {
                continue;
            }
            ts.sort_by(f32::total_cmp);
            ts.dedup_by(|a, b| a == b); // −0 and +0 are one threshold
            if ts.len() > usize::from(u16::MAX) - 1 {
                return Err(format!(
                    "feature index {f} has {} distinct thresholds; at most {} are supported",
                    ts.len(),
                    u16::MAX - 1
                ));
            }
            for v in 0..4 {
                if used[f][v] {
                    column_of[f][v] = Some(columns);
                    columns += 1;
                }
            }
            features.push(FeatureBins {
                feature: f,
                thresholds: ts,
                columns: column_of[f].map(|c| c.map(|c| c as u16)),
            });
        }
        if columns > usize::from(u16::MAX) {
            return Err(format!(
                "the forest needs {columns} bin columns; at most {} are supported",
                u16::MAX
            ));
        }
        let threshold_index: Vec<Option<&FeatureBins>> = {
            let mut by_feature = vec![None; d];
            for fb in &features {
                by_feature[fb.feature] = Some(fb);
            }
            by_feature
        };

        let mut nodes = Vec::new();
        let mut leaves = Vec::new();
        let mut trees = Vec::with_capacity(forest.trees.len());
        for (t, tree) in forest.trees.iter().enumerate() {
            let n = tree.nodes.len();
            if n > usize::from(u16::MAX) {
                return Err(format!(
                    "tree {t} has {n} nodes; at most {} are supported",
                    u16::MAX
                ));
            }
            // Breadth-first order for the splits (the top levels share cache lines), then
            // the leaves.
            let mut order = Vec::with_capacity(n);
            let mut queue = std::collections::VecDeque::from([0usize]);
            let mut leaf_order = Vec::new();
            while let Some(i) = queue.pop_front() {
                match tree.nodes[i] {
                    Node::Leaf { .. } => leaf_order.push(i),
                    Node::Split { left, right, .. } => {
                        order.push(i);
                        queue.push_back(left as usize);
                        queue.push_back(right as usize);
                    }
                }
            }
            let internal = order.len();
            order.extend(leaf_order);
            let mut new_index = vec![0u16; n];
            for (new, &old) in order.iter().enumerate() {
                new_index[old] = new as u16;
            }
            let start = nodes.len();
            let leaf_start = leaves.len();
            for (new, &old) in order.iter().enumerate() {
                match tree.nodes[old] {
                    Node::Leaf { value } => {
                        leaves.push(value);
                        let me = new as u16;
                        nodes.push(FlatNode {
                            column: 0,
                            bin: 0,
                            child: [me, me],
                        });
                    }
                    Node::Split {
                        feature,
                        threshold,
                        nan_left,
                        zero_missing,
                        left,
                        right,
                    } => {
                        let f = feature as usize;
                        let fb = threshold_index[f].expect("a split feature has thresholds");
                        // Index of the threshold among the feature's distinct thresholds.
                        let k = fb.thresholds.partition_point(|&u| u < threshold);
                        let column = column_of[f][variant(nan_left, zero_missing)]
                            .expect("the column of a used variant exists");
                        nodes.push(FlatNode {
                            column: column as u16,
                            bin: (k + usize::from(nan_left)) as u16,
                            child: [new_index[left as usize], new_index[right as usize]],
                        });
                    }
                }
            }
            trees.push(FlatTree {
                start,
                internal,
                len: n,
                leaf_start,
                depth: tree.depth(),
            });
        }
        Ok(CompiledForest {
            num_features: d,
            base_score: forest.base_score,
            features,
            columns: columns.max(1),
            nodes,
            leaves,
            trees,
        })
    }

    pub fn num_features(&self) -> usize {
        self.num_features
    }

    pub fn num_trees(&self) -> usize {
        self.trees.len()
    }

    /// Scores `n_rows` rows (row-major, `num_features` values each; NaN is a missing
    /// value), writing `base_score + Σ_t T_t(x)` per row into `out`.
    pub fn score_into(&self, x: &[f32], n_rows: usize, out: &mut [f64]) -> Result<(), String> {
        let d = self.num_features;
        if x.len() != n_rows * d || out.len() != n_rows {
            return Err(format!(
                "{} feature values and {} outputs for {n_rows} rows of {d} features",
                x.len(),
                out.len()
            ));
        }
        let mut bins = vec![0u16; BLOCK * self.columns];
        let mut at = [0u16; BLOCK];
        for (rows, scores) in x.chunks(BLOCK * d).zip(out.chunks_mut(BLOCK)) {
            let nb = scores.len();
            self.bin_block(rows, nb, &mut bins);
            scores.fill(self.base_score);
            for tree in &self.trees {
                self.walk(tree, &bins, &mut at[..nb], scores);
            }
        }
        Ok(())
    }

    /// Scores as `f32` (what the reranker returns).
    pub fn score(&self, x: &[f32], n_rows: usize) -> Result<Vec<f32>, String> {
        let mut out = vec![0f64; n_rows];
        self.score_into(x, n_rows, &mut out)?;
        Ok(out.into_iter().map(|s| s as f32).collect())
    }

    /// Bins of `nb` rows: `bins[r * columns + c]`.
    fn bin_block(&self, rows: &[f32], nb: usize, bins: &mut [u16]) {
        let d = self.num_features;
        let cols = self.columns;
        for r in 0..nb {
            let row = &rows[r * d..(r + 1) * d];
            let out = &mut bins[r * cols..(r + 1) * cols];
            for fb in &self.features {
                let x = row[fb.feature];
                let nan = x.is_nan();
                let b = if nan {
                    0
                } else {
                    fb.thresholds.partition_point(|&u| u < x) as u16
                };
                for (v, column) in fb.columns.iter().enumerate() {
                    let Some(c) = column else { continue };
                    let missing = nan || (v >= 2 && x.abs() <= ZERO_BAND);
                    out[usize::from(*c)] = match (missing, v & 1 == 1) {
                        (true, false) => MISSING_RIGHT_BIN,
                        (true, true) => MISSING_LEFT_BIN,
                        (false, false) => b,
                        (false, true) => b + 1,
                    };
                }
            }
        }
    }

    /// One tree over a block: `depth` lockstep steps, then the leaf values.
    #[inline]
    fn walk(&self, tree: &FlatTree, bins: &[u16], at: &mut [u16], scores: &mut [f64]) {
        let nodes = &self.nodes[tree.start..tree.start + tree.len];
        let leaves = &self.leaves[tree.leaf_start..tree.leaf_start + tree.len - tree.internal];
        let cols = self.columns;
        at.fill(0);
        for _ in 0..tree.depth {
            for (r, node_index) in at.iter_mut().enumerate() {
                let node = nodes[usize::from(*node_index)];
                let bin = bins[r * cols + usize::from(node.column)];
                *node_index = node.child[usize::from(bin > node.bin)];
            }
        }
        for (score, &node_index) in scores.iter_mut().zip(at.iter()) {
            *score += leaves[usize::from(node_index) - tree.internal];
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::forest::tests::{leaf, small_tree};
    use super::super::forest::Tree;
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// A random tree of `leaves` leaves grown by splitting random leaves, thresholds drawn
    /// from `grid` (so rows can hit them exactly), random NaN sides.
    pub(crate) fn random_tree(rng: &mut ChaCha8Rng, d: usize, leaves: usize, grid: &[f32]) -> Tree {
        random_tree_with(rng, d, leaves, grid, 0.3)
    }

    /// As [`random_tree`] without LightGBM's zero band.
    pub(crate) fn random_tree_plain(
        rng: &mut ChaCha8Rng,
        d: usize,
        leaves: usize,
        grid: &[f32],
    ) -> Tree {
        random_tree_with(rng, d, leaves, grid, 0.0)
    }

    fn random_tree_with(
        rng: &mut ChaCha8Rng,
        d: usize,
        leaves: usize,
        grid: &[f32],
        zero_share: f64,
    ) -> Tree {
        let mut nodes = vec![leaf(rng.random_range(-1.0..1.0))];
        let mut open = vec![0usize];
        while open.len() < leaves {
            let pick = rng.random_range(0..open.len());
            let i = open.swap_remove(pick);
            let (l, r) = (nodes.len() as u32, nodes.len() as u32 + 1);
            nodes.push(leaf(rng.random_range(-1.0..1.0)));
            nodes.push(leaf(rng.random_range(-1.0..1.0)));
            nodes[i] = Node::Split {
                feature: rng.random_range(0..d as u32),
                threshold: grid[rng.random_range(0..grid.len())],
                nan_left: rng.random_bool(0.5),
                zero_missing: rng.random_bool(zero_share),
                left: l,
                right: r,
            };
            open.push(l as usize);
            open.push(r as usize);
        }
        Tree { nodes }
    }

    /// Values on the thresholds, between them, beyond them, signed zeros, infinities, NaN.
    fn random_rows(rng: &mut ChaCha8Rng, n: usize, d: usize, grid: &[f32]) -> Vec<f32> {
        (0..n * d)
            .map(|_| match rng.random_range(0..10) {
                0 => f32::NAN,
                1 => -0.0,
                2 => f32::INFINITY,
                3 => f32::NEG_INFINITY,
                4..=6 => grid[rng.random_range(0..grid.len())],
                _ => rng.random_range(-3.0f32..3.0),
            })
            .collect()
    }

    /// The compiled scorer equals the reference walk bit for bit, on rows that sit exactly
    /// on thresholds, between them, at ±0, ±∞ and NaN, across block boundaries.
    #[test]
    fn compiled_equals_the_reference_walk() {
        let mut rng = ChaCha8Rng::seed_from_u64(15);
        let grid: Vec<f32> = vec![
            -2.5,
            -1.0,
            -0.0,
            0.0,
            f32::MIN_POSITIVE,
            ZERO_BAND,
            -ZERO_BAND,
            1e-36,
            0.1,
            0.5,
            1.0,
            1.0000001,
            2.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ];
        for trial in 0..40 {
            let d = rng.random_range(1..6);
            let trees = (0..rng.random_range(1..30))
                .map(|_| {
                    let leaves = rng.random_range(1..40);
                    random_tree(&mut rng, d, leaves, &grid)
                })
                .collect();
            let forest = Forest {
                num_features: d,
                base_score: rng.random_range(-1.0..1.0),
                trees,
            };
            let compiled = CompiledForest::new(&forest).unwrap();
            let n = [1, 63, 64, 65, 200][trial % 5];
            let x = random_rows(&mut rng, n, d, &grid);
            let mut got = vec![0f64; n];
            compiled.score_into(&x, n, &mut got).unwrap();
            for r in 0..n {
                let want = forest.predict_row(&x[r * d..(r + 1) * d]);
                assert_eq!(got[r].to_bits(), want.to_bits(), "trial {trial} row {r}");
            }
        }
    }

    #[test]
    fn by_hand_and_errors() {
        let forest = Forest {
            num_features: 2,
            base_score: 0.5,
            trees: vec![small_tree(), Tree::leaf(10.0)],
        };
        let c = CompiledForest::new(&forest).unwrap();
        let s = c
            .score(&[0.5, -1.0, f32::NAN, 0.0, 0.0, f32::NAN], 3)
            .unwrap();
        assert_eq!(s, [11.5, 13.5, 11.5]);
        assert!(c.score(&[1.0], 1).unwrap_err().contains("1 feature values"));
        // Leaves only: no bin column is needed.
        let only_leaves = Forest {
            num_features: 3,
            base_score: 0.0,
            trees: vec![Tree::leaf(1.0), Tree::leaf(2.0)],
        };
        let c = CompiledForest::new(&only_leaves).unwrap();
        assert_eq!(c.score(&[0.0; 6], 2).unwrap(), [3.0, 3.0]);
        let bad = Forest {
            num_features: 1,
            base_score: 0.0,
            trees: vec![small_tree()],
        };
        assert!(CompiledForest::new(&bad)
            .unwrap_err()
            .contains("tree 0: node 1 splits on feature index 1"));
    }
}
