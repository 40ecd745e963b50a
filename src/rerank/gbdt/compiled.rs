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
//! **Missing values.** A missing value (NaN; with LightGBM's zero band also `|x| ≤ 1e-35`,
//! see [`super::forest::ZERO_BAND`]) must reach the side its node names, and nodes on the
//! same feature may name different sides. Usually one bin does for all of them: if every
//! node that sends missing values right has a lower threshold index than every node that
//! sends them left, a missing value gets the bin `b* = 1 + max k` of the former (LightGBM's
//! "NaN compares as 0.0" and most XGBoost models are like this), and one column holds the
//! feature. Otherwise the feature gets two columns: *missing-right* stores `b(x)` and
//! `u16::MAX` for a missing value (above every `k`), *missing-left* stores `b(x) + 1` and 0
//! (below every `k + 1`), and each node reads the column of its side, comparing with `k`
//! or `k + 1`. Still one comparison per node.
//!
//! **Traversal.** Nodes are 8 bytes: where the node's bin column starts, the bin
//! threshold, and the left child; the right child is always the next node (breadth-first
//! numbering puts siblings side by side), so a step is `node = left + (bin > threshold)`, a
//! compare and an add, no branch. A leaf is its own left child with the threshold
//! `u16::MAX`: a walk that reaches it stays there. Documents are binned in blocks of 128
//! (a usual window of 100 is one block) and walked 8 at a time: a group's bins are stored
//! column by column with its 8 documents side by side, the 8 walkers stay in registers
//! and step together until a step moves none of them (the only branch of the walk, one per
//! group and tree). The next tree's nodes and leaf values are prefetched while a tree is
//! walked. Leaf values are added in tree order in `f64`, so scores equal
//! [`Forest::predict_row`] bit for bit. Binning skips the binary search for 0.0, the
//! common value of sparse features.
//!
//! **Byte bins.** When every feature has at most 253 distinct thresholds (any model
//! trained with LightGBM's or XGBoost's 255 histogram bins) the bins are stored as `u8`
//! (a missing value of a missing-right column gets 254, above every node's bin; nodes are
//! unchanged), else as `u16`. The walk is bound by the latency of its dependent loads (node,
//! then the document's bin, then the next node): on the LightGBM benchmark model (208
//! features used) a window of 100 documents holds 13 groups × 208 columns of bins, 43 KB as
//! `u16`, more than Zen 4's 32 KB L1 data cache, and 21 KB as `u8`. Binning goes row by row
//! (each row's features read in increasing order) instead of feature by feature (a strided
//! read of every row for each feature).
//!
//! Other layouts were measured on a LightGBM model of 1000 trees × 64 leaves (notes in
//! `bench/gbdt_predict.py`'s report and docs/BENCHMARKS.md): walking the whole block for
//! each tree's full depth was 1.9× slower, and a branch-free compacted list of unfinished
//! walkers 3× slower (its stores wait on every step's result). On 2026-11-26 (AMD EPYC Zen 4,
//! same session, alternating with the current code): an AVX-512 walk — nodes packed in 4
//! bytes, 16 documents per register, every group of the block stepping in turn so their
//! gathers overlap, one `vpgatherdd` for the nodes and one for the byte bins per step, leaf
//! values added with a masked `f64` gather — took 2.1–2.3 ms against 1.06–1.15 ms for
//! this scalar walk, and 2.7 ms when finished groups kept stepping (estimated from the
//! step count: ≈ 90 cycles per 16-lane step, where the scalar walk spends ≈ 3.5 cycles per
//! document step; the gathers are the cost); rejected and removed. Blocks of 32 or 64
//! documents instead of 128 (bins in L1 with `u16`, but every tree's nodes streamed 4× or
//! 2× as often): 1.64 and 1.13 ms on the loaded host, no gain.
//!
//! This is the plain per-document walk made branch-free and interleaved, not QuickScorer's
//! bitvector scheme. Limits (checked when compiling, with the offending tree or feature
//! named): at most 65 535 nodes per tree, 65 534 distinct thresholds per feature and 65 535
//! bin columns.

use super::forest::{Forest, Node, ZERO_BAND};

/// Documents binned together (a usual window of 100 is one block).
const BLOCK: usize = 128;
/// Documents walked together through a tree (their walk state fits in registers).
const GROUP: usize = 8;
const MISSING_RIGHT_BIN: u16 = u16::MAX;
const MISSING_LEFT_BIN: u16 = 0;

/// A node in 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C)]
struct FlatNode {
    /// Where the node's bin column starts in a group's bins (`column · GROUP`).
    column_start: u32,
    /// Go right iff the column's bin is above this (`u16::MAX` for a leaf: never).
    bin: u16,
    /// The left child; the right child is the next node (`left + 1`). A leaf is its own
    /// left child, so a walk that reaches it stays there.
    left: u16,
}

impl FlatNode {
    fn new(column_start: u32, bin: u16, left: u16) -> Self {
        FlatNode {
            column_start,
            bin,
            left,
        }
    }
}

#[derive(Debug, Clone)]
struct FlatTree {
    /// Where the tree's nodes (and their values) start in `nodes` and `values`.
    start: usize,
    len: usize,
}

/// Asks for the cache lines of `data` ahead of their use (the next tree's nodes and leaves
/// while the current tree is walked).
#[inline]
fn prefetch<T>(data: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let bytes = std::mem::size_of_val(data);
        let base = data.as_ptr().cast::<i8>();
        for offset in (0..bytes).step_by(64) {
            // SAFETY: prefetching is a hint; the address is inside `data`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(base.add(offset)) };
        }
    }
}

/// How a column encodes a missing value.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Encode {
    /// Regular bins, a missing value gets this bin.
    Fixed(u16),
    /// Regular bins, a missing value gets `u16::MAX`.
    MissingRight,
    /// Regular bins plus one, a missing value gets 0.
    MissingLeft,
}

#[derive(Debug, Clone, Copy)]
struct Column {
    index: u16,
    /// Whether the zero band counts as missing for this column.
    zero_missing: bool,
    encode: Encode,
}

/// A feature's sorted distinct thresholds and the columns that store its bins.
#[derive(Debug, Clone)]
struct FeatureBins {
    feature: usize,
    thresholds: Vec<f32>,
    /// The bin of 0.0 (sparse features are mostly zeros).
    zero_bin: u16,
    columns: Vec<Column>,
}

impl FeatureBins {
    /// `#{t : t < x}`: a binary search, skipped for 0.0 (most values of sparse features).
    #[inline]
    fn bin(&self, x: f32) -> u16 {
        if x == 0.0 {
            self.zero_bin
        } else {
            self.thresholds.partition_point(|&u| u < x) as u16
        }
    }
}

/// Where the nodes of one (feature, missing kind) read their bins.
#[derive(Debug, Clone, Copy)]
enum Layout {
    One(u16),
    Two {
        right: Option<u16>,
        left: Option<u16>,
    },
}

/// A forest compiled for scoring (see the module doc).
#[derive(Debug, Clone)]
pub struct CompiledForest {
    num_features: usize,
    base_score: f64,
    features: Vec<FeatureBins>,
    columns: usize,
    nodes: Vec<FlatNode>,
    /// Per node: its leaf value (0 for a split).
    values: Vec<f64>,
    trees: Vec<FlatTree>,
    /// Whether every feature has at most [`NARROW_MAX_THRESHOLDS`] distinct thresholds, so
    /// its bins fit a byte.
    narrow: bool,
}

/// Distinct thresholds per feature for byte bins: bins `0..=m`, plus one for the
/// missing-left encoding, stay below [`NARROW_MISSING_RIGHT`].
const NARROW_MAX_THRESHOLDS: usize = 253;
/// A missing value in a missing-right column of byte bins (above every node's bin).
const NARROW_MISSING_RIGHT: u8 = 254;

/// A document's bin in one column: `u16`, or `u8` when every feature's bins fit.
trait Bin: Copy + Default {
    const MISSING_RIGHT: Self;
    /// `b`, known to fit.
    fn of(b: u16) -> Self;
    fn get(self) -> u16;
}

impl Bin for u16 {
    const MISSING_RIGHT: Self = MISSING_RIGHT_BIN;
    #[inline]
    fn of(b: u16) -> Self {
        b
    }
    #[inline]
    fn get(self) -> u16 {
        self
    }
}

impl Bin for u8 {
    const MISSING_RIGHT: Self = NARROW_MISSING_RIGHT;
    #[inline]
    fn of(b: u16) -> Self {
        // Bins ≤ 253, a missing-left column's `b + 1` ≤ 254 (it has no missing-right value).
        debug_assert!(b <= u16::from(NARROW_MISSING_RIGHT));
        b as u8
    }
    #[inline]
    fn get(self) -> u16 {
        u16::from(self)
    }
}

/// How wide the bins [`CompiledForest::score_with`] stores are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinWidth {
    /// `u16` bins: every forest (the layout before 2026-11-26).
    U16,
    /// `u8` bins: forests whose features have at most 253 distinct thresholds each (any
    /// model trained with LightGBM's or XGBoost's 255 histogram bins); a window's bins then
    /// fit the L1 cache.
    U8,
}

impl CompiledForest {
    /// Compiles a valid forest ([`Forest::validate`]); an error names the limit exceeded.
    pub fn new(forest: &Forest) -> Result<Self, String> {
        forest.validate()?;
        let d = forest.num_features;
        let mut thresholds: Vec<Vec<f32>> = vec![Vec::new(); d];
        for tree in &forest.trees {
            for node in &tree.nodes {
                if let Node::Split {
                    feature, threshold, ..
                } = *node
                {
                    thresholds[feature as usize].push(threshold);
                }
            }
        }
        for (f, ts) in thresholds.iter_mut().enumerate() {
            ts.sort_by(f32::total_cmp);
            ts.dedup_by(|a, b| a == b); // −0 and +0 are one threshold
            if ts.len() > usize::from(u16::MAX) - 1 {
                return Err(format!(
                    "feature index {f} has {} distinct thresholds; at most {} are supported",
                    ts.len(),
                    u16::MAX - 1
                ));
            }
        }
        let index_of = |f: usize, t: f32| thresholds[f].partition_point(|&u| u < t);
        // Per feature and missing kind: the threshold indices of the nodes that send a
        // missing value right, and of those that send it left.
        let mut sides: Vec<[[Vec<usize>; 2]; 2]> = vec![Default::default(); d];
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
                    let f = feature as usize;
                    sides[f][usize::from(zero_missing)][usize::from(nan_left)]
                        .push(index_of(f, threshold));
                }
            }
        }
        let mut columns = 0usize;
        let mut features = Vec::new();
        let mut layout: Vec<[Option<Layout>; 2]> = vec![[None; 2]; d];
        for f in 0..d {
            let mut cols = Vec::new();
            for zero_missing in [false, true] {
                let [right, left] = &sides[f][usize::from(zero_missing)];
                if right.is_empty() && left.is_empty() {
                    continue;
                }
                let mut take = |encode| {
                    let index = columns as u16;
                    columns += 1;
                    cols.push(Column {
                        index,
                        zero_missing,
                        encode,
                    });
                    index
                };
                let fixed = right.iter().max().map_or(0, |k| k + 1);
                layout[f][usize::from(zero_missing)] = Some(if left.iter().all(|&k| fixed <= k) {
                    Layout::One(take(Encode::Fixed(fixed as u16)))
                } else {
                    Layout::Two {
                        right: (!right.is_empty()).then(|| take(Encode::MissingRight)),
                        left: Some(take(Encode::MissingLeft)),
                    }
                });
            }
            if !cols.is_empty() {
                let ts = std::mem::take(&mut thresholds[f]);
                let zero_bin = ts.partition_point(|&u| u < 0.0) as u16;
                features.push(FeatureBins {
                    feature: f,
                    zero_bin,
                    thresholds: ts,
                    columns: cols,
                });
            }
        }
        if columns > usize::from(u16::MAX) {
            return Err(format!(
                "the forest needs {columns} bin columns; at most {} are supported",
                u16::MAX
            ));
        }
        // Thresholds were moved into `features`; index them again by feature.
        let mut by_feature: Vec<Option<&FeatureBins>> = vec![None; d];
        for fb in &features {
            by_feature[fb.feature] = Some(fb);
        }

        let mut nodes = Vec::new();
        let mut values = Vec::new();
        let mut trees = Vec::with_capacity(forest.trees.len());
        for (t, tree) in forest.trees.iter().enumerate() {
            let n = tree.nodes.len();
            if n > usize::from(u16::MAX) {
                return Err(format!(
                    "tree {t} has {n} nodes; at most {} are supported",
                    u16::MAX
                ));
            }
            // Breadth-first, each split's two children numbered one after the other.
            let mut order = vec![0usize];
            let mut left_of = vec![0u16; n];
            let mut k = 0;
            while k < order.len() {
                if let Node::Split { left, right, .. } = tree.nodes[order[k]] {
                    left_of[order[k]] = order.len() as u16;
                    order.push(left as usize);
                    order.push(right as usize);
                }
                k += 1;
            }
            let start = nodes.len();
            for (new, &old) in order.iter().enumerate() {
                match tree.nodes[old] {
                    Node::Leaf { value } => {
                        values.push(value);
                        nodes.push(FlatNode::new(0, u16::MAX, new as u16));
                    }
                    Node::Split {
                        feature,
                        threshold,
                        nan_left,
                        zero_missing,
                        ..
                    } => {
                        let f = feature as usize;
                        let fb = by_feature[f].expect("a split feature has bins");
                        let k = fb.thresholds.partition_point(|&u| u < threshold);
                        let (column, bin) = match layout[f][usize::from(zero_missing)]
                            .expect("a used (feature, kind) has a layout")
                        {
                            Layout::One(c) => (c, k),
                            Layout::Two { right, .. } if !nan_left => {
                                (right.expect("a right-missing node has its column"), k)
                            }
                            Layout::Two { left, .. } => {
                                (left.expect("a left-missing node has its column"), k + 1)
                            }
                        };
                        values.push(0.0);
                        nodes.push(FlatNode::new(
                            u32::from(column) * GROUP as u32,
                            bin as u16,
                            left_of[old],
                        ));
                    }
                }
            }
            trees.push(FlatTree { start, len: n });
        }
        let narrow = features
            .iter()
            .all(|fb| fb.thresholds.len() <= NARROW_MAX_THRESHOLDS);
        Ok(CompiledForest {
            num_features: d,
            base_score: forest.base_score,
            features,
            columns: columns.max(1),
            nodes,
            values,
            trees,
            narrow,
        })
    }

    /// The bins [`Self::score_into`] uses for this forest: bytes when they fit.
    pub fn bin_width(&self) -> BinWidth {
        if self.narrow {
            BinWidth::U8
        } else {
            BinWidth::U16
        }
    }

    pub fn num_features(&self) -> usize {
        self.num_features
    }

    pub fn num_trees(&self) -> usize {
        self.trees.len()
    }

    /// Bin columns per document (what a block of documents holds).
    pub fn num_columns(&self) -> usize {
        self.columns
    }

    /// Scores `n_rows` rows (row-major, `num_features` values each; NaN is a missing
    /// value), writing `base_score + Σ_t T_t(x)` per row into `out`.
    pub fn score_into(&self, x: &[f32], n_rows: usize, out: &mut [f64]) -> Result<(), String> {
        self.score_with(self.bin_width(), x, n_rows, out)
    }

    /// [`Self::score_into`] with bins of the given width (tests and benchmarks compare
    /// them); `U8` for a forest whose bins do not fit a byte uses `U16`.
    pub fn score_with(
        &self,
        width: BinWidth,
        x: &[f32],
        n_rows: usize,
        out: &mut [f64],
    ) -> Result<(), String> {
        let d = self.num_features;
        if x.len() != n_rows * d || out.len() != n_rows {
            return Err(format!(
                "{} feature values and {} outputs for {n_rows} rows of {d} features",
                x.len(),
                out.len()
            ));
        }
        if width == BinWidth::U8 && self.narrow {
            self.score_blocks::<u8>(x, out);
        } else {
            self.score_blocks::<u16>(x, out);
        }
        Ok(())
    }

    fn score_blocks<B: Bin>(&self, x: &[f32], out: &mut [f64]) {
        let d = self.num_features;
        let mut bins = vec![B::default(); BLOCK * self.columns];
        for (rows, scores) in x.chunks(BLOCK * d).zip(out.chunks_mut(BLOCK)) {
            self.bin_block(rows, scores.len(), &mut bins);
            scores.fill(self.base_score);
            for (t, tree) in self.trees.iter().enumerate() {
                if let Some(next) = self.trees.get(t + 1) {
                    prefetch(&self.nodes[next.start..next.start + next.len]);
                    prefetch(&self.values[next.start..next.start + next.len]);
                }
                self.walk(tree, &bins, scores);
            }
        }
    }

    /// Scores as `f32` (what the reranker returns).
    pub fn score(&self, x: &[f32], n_rows: usize) -> Result<Vec<f32>, String> {
        let mut out = vec![0f64; n_rows];
        self.score_into(x, n_rows, &mut out)?;
        Ok(out.into_iter().map(|s| s as f32).collect())
    }

    /// Bins of `nb` rows in groups of `GROUP` documents, each group column by column:
    /// `bins[(r / GROUP) · columns · GROUP + c · GROUP + r % GROUP]`.
    fn bin_block<B: Bin>(&self, rows: &[f32], nb: usize, bins: &mut [B]) {
        let d = self.num_features;
        let group_len = self.columns * GROUP;
        // Row by row: the features are read in increasing order from one row (the bins are
        // written 2·GROUP bytes apart per column, within the row's group).
        for (r, row) in rows.chunks_exact(d).take(nb).enumerate() {
            let at = (r / GROUP) * group_len + r % GROUP;
            for fb in &self.features {
                let x = row[fb.feature];
                let nan = x.is_nan();
                let b = if nan { 0 } else { fb.bin(x) };
                for c in &fb.columns {
                    let missing = nan || (c.zero_missing && x.abs() <= ZERO_BAND);
                    bins[at + usize::from(c.index) * GROUP] = match (c.encode, missing) {
                        (Encode::Fixed(m), true) => B::of(m),
                        (Encode::MissingRight, true) => B::MISSING_RIGHT,
                        (Encode::MissingLeft, true) => B::of(MISSING_LEFT_BIN),
                        (Encode::MissingLeft, false) => B::of(b + 1),
                        (_, false) => B::of(b),
                    };
                }
            }
        }
    }

    /// One tree over a block, `GROUP` documents at a time in lockstep until none moves.
    #[inline]
    fn walk<B: Bin>(&self, tree: &FlatTree, bins: &[B], scores: &mut [f64]) {
        let nb = scores.len();
        let nodes = &self.nodes[tree.start..tree.start + tree.len];
        let values = &self.values[tree.start..tree.start + tree.len];
        assert!(nb <= BLOCK && bins.len() >= self.columns * BLOCK);
        let group_len = self.columns * GROUP;
        for g0 in (0..nb).step_by(GROUP) {
            let group_bins = &bins[g0 * self.columns..g0 * self.columns + group_len];
            let mut at = [0u32; GROUP];
            loop {
                let mut moved = 0u32;
                for (g, n) in at.iter_mut().enumerate() {
                    // SAFETY: `n` is a node of this tree (the root, or a child index
                    // written at compile time, `< len`); `column_start + g < columns ·
                    // GROUP = group_bins.len()`.
                    unsafe {
                        let node = *nodes.get_unchecked(*n as usize);
                        let bin = group_bins
                            .get_unchecked(node.column_start as usize + g)
                            .get();
                        let next = u32::from(node.left) + u32::from(bin > node.bin);
                        moved += next ^ *n;
                        *n = next;
                    }
                }
                if moved == 0 {
                    break;
                }
            }
            for (score, &n) in scores[g0..].iter_mut().zip(&at) {
                *score += values[n as usize];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::forest::Tree;
    use super::*;
    use crate::rerank::testutil::{leaf, random_tree, small_tree};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

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
        // Thresholds are finite (`Tree::validate`); rows hold ±∞ too.
        let thresholds: Vec<f32> = grid.iter().copied().filter(|t| t.is_finite()).collect();
        let mut layouts = [0usize; 2];
        for trial in 0..40 {
            let d = rng.random_range(1..6);
            let trees = (0..rng.random_range(1..30))
                .map(|_| {
                    let leaves = rng.random_range(1..40);
                    random_tree(&mut rng, d, leaves, &thresholds)
                })
                .collect();
            let forest = Forest {
                num_features: d,
                base_score: rng.random_range(-1.0..1.0),
                trees,
            };
            let compiled = CompiledForest::new(&forest).unwrap();
            // One bin column per (feature, missing kind) unless the nodes' missing sides
            // conflict; both cases occur (counted: some kind with one column, some with two).
            let kinds: std::collections::HashSet<(u32, bool)> = forest
                .trees
                .iter()
                .flat_map(|t| &t.nodes)
                .filter_map(|n| match *n {
                    Node::Split {
                        feature,
                        zero_missing,
                        ..
                    } => Some((feature, zero_missing)),
                    Node::Leaf { .. } => None,
                })
                .collect();
            let k = kinds.len().max(1);
            layouts[0] += usize::from(compiled.num_columns() < 2 * k);
            layouts[1] += usize::from(compiled.num_columns() > k);
            // Group (8) and block (128) boundaries, and partial groups.
            let n = [1, 7, 8, 9, 127, 128, 129, 300][trial % 8];
            let x = random_rows(&mut rng, n, d, &grid);
            assert_same_as_reference(&forest, &compiled, &x, n, &format!("trial {trial}"));
        }
        assert!(layouts[0] > 0 && layouts[1] > 0, "{layouts:?}");
    }

    /// Both bin widths score `x` as the reference walk does, bit for bit.
    fn assert_same_as_reference(
        forest: &Forest,
        compiled: &CompiledForest,
        x: &[f32],
        n: usize,
        what: &str,
    ) {
        let d = forest.num_features;
        for width in [BinWidth::U16, BinWidth::U8] {
            let mut got = vec![0f64; n];
            compiled.score_with(width, x, n, &mut got).unwrap();
            for r in 0..n {
                let want = forest.predict_row(&x[r * d..(r + 1) * d]);
                assert_eq!(got[r].to_bits(), want.to_bits(), "{what} {width:?} row {r}");
            }
        }
    }

    /// Byte bins where every feature has at most 253 distinct thresholds (the limit itself
    /// included, so the highest bins and the missing-right bin 254 are exercised), `u16`
    /// bins beyond, same scores either way.
    #[test]
    fn bin_widths_and_their_limit() {
        let mut rng = ChaCha8Rng::seed_from_u64(1515);
        let grid: Vec<f32> = (0..300).map(|i| i as f32 / 100.0 - 1.0).collect();
        for (what, distinct, narrow) in [
            ("few thresholds", 30, true),
            ("253 thresholds", 253, true),
            ("254 thresholds", 254, false),
        ] {
            let thresholds = &grid[..distinct];
            let mut trees: Vec<Tree> = (0..20)
                .map(|_| random_tree(&mut rng, 2, 64, thresholds))
                .collect();
            // Every threshold used on feature 0, both missing sides.
            trees.extend(thresholds.iter().enumerate().map(|(i, &t)| {
                Tree::new(vec![
                    Node::Split {
                        feature: 0,
                        threshold: t,
                        nan_left: i % 2 == 0,
                        zero_missing: i % 3 == 0,
                        left: 1,
                        right: 2,
                    },
                    leaf(i as f64),
                    leaf(-(i as f64) / 7.0),
                ])
            }));
            let forest = Forest {
                num_features: 2,
                base_score: 0.25,
                trees,
            };
            let compiled = CompiledForest::new(&forest).unwrap();
            let want = if narrow { BinWidth::U8 } else { BinWidth::U16 };
            assert_eq!(compiled.bin_width(), want, "{what}");
            for n in [1, 8, 9, 100, 129] {
                let mut x = random_rows(&mut rng, n, 2, &grid);
                // Values at and beyond the ends of the threshold list.
                x[0] = grid[distinct - 1];
                x[n * 2 - 1] = 5.0;
                assert_same_as_reference(&forest, &compiled, &x, n, what);
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
