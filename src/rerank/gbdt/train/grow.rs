//! One regression tree grown leaf-wise on histograms (SPEC §3.6; LightGBM's algorithm):
//! every leaf knows its best split; the leaf whose best split gains most is split next,
//! until the tree has `leaves` leaves or no split gains. A leaf's histogram holds, per
//! feature and bin, the sums of gradients, hessians and rows; the smaller child's is built
//! from its rows and the larger child's is the parent's minus it. `TreeLearner` holds these
//! steps as methods, laid out as LightGBM's `SerialTreeLearner` (`BeforeTrain`,
//! `FindBestSplits`, `ConstructHistograms`, `Split`) over a pool of histogram buffers.
//!
//! For a node with sums (G, H): leaf value `−G/(H + λ)·η` (η the learning rate); a split's
//! gain `½·[G_L²/(H_L + λ) + G_R²/(H_R + λ) − G²/(H + λ)] − γ`, kept only if positive and
//! both children have at least `min_data_in_leaf` rows and `min_sum_hessian` hessian. Missing
//! values (the feature's missing bin) are tried on both sides and the better side is
//! stored in the node; a node that saw no missing value sends one where a 0.0 would go
//! (rankd's features default missing values to 0). "Missing values right, every other
//! value left" is a split at the feature's largest training value.
//!
//! Deterministic: histograms and split searches run in parallel over features (rayon), each
//! feature summed in row order, and the best split is reduced in feature order (ties go
//! to the lower feature, then the lower bin).

use rayon::prelude::*;

use super::bins::Binned;
use super::GbdtParams;
use crate::rerank::gbdt::forest::{Node, Tree};

#[derive(Debug, Clone, Copy, Default)]
struct Sums {
    g: f64,
    h: f64,
    c: u32,
}

impl Sums {
    fn add(&mut self, o: &Sums) {
        self.g += o.g;
        self.h += o.h;
        self.c += o.c;
    }

    fn minus(&self, o: &Sums) -> Sums {
        Sums {
            g: self.g - o.g,
            h: self.h - o.h,
            c: self.c - o.c,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Split {
    gain: f64,
    feature: usize,
    /// Regular bins `0..=bin` go left.
    bin: usize,
    missing_left: bool,
    /// Whether the node's rows had missing values (else `missing_left` was not chosen).
    saw_missing: bool,
    left: Sums,
    right: Sums,
}

/// The tree's split nodes and leaves as built, before they become [`Node`]s.
enum Built {
    Split {
        feature: usize,
        bin: usize,
        missing_left: bool,
        saw_missing: bool,
        left: usize,
        right: usize,
    },
    Leaf(f64),
}

/// Histogram work (rows × features) below which a histogram or split search runs on one
/// thread: rayon's task overhead outweighs the work of small leaves.
const PARALLEL_WORK: usize = 1 << 16;

/// A tree's histograms: for each feature it may split on (in `features` order), its bins'
/// sums, the missing bin last; `offsets[k]..offsets[k + 1]` is feature `features[k]`'s range.
struct Layout<'a> {
    data: &'a Binned,
    features: &'a [usize],
    offsets: Vec<usize>,
}

impl<'a> Layout<'a> {
    fn new(data: &'a Binned, features: &'a [usize]) -> Self {
        let mut offsets = Vec::with_capacity(features.len() + 1);
        offsets.push(0);
        for &f in features {
            offsets.push(offsets.last().copied().unwrap_or(0) + data.features[f].regular() + 1);
        }
        Layout {
            data,
            features,
            offsets,
        }
    }

    fn len(&self) -> usize {
        self.offsets[self.features.len()]
    }

    /// The histogram split into each feature's bins, with the feature's index.
    fn per_feature<'h>(&self, mut hist: &'h mut [Sums]) -> Vec<(usize, &'h mut [Sums])> {
        let mut parts = Vec::with_capacity(self.features.len());
        for (k, &f) in self.features.iter().enumerate() {
            let (part, rest) = hist.split_at_mut(self.offsets[k + 1] - self.offsets[k]);
            parts.push((f, part));
            hist = rest;
        }
        parts
    }

    /// Fills `hist` with the sums of `rows`, whose gradients and hessians are `ordered`
    /// (row order) and whose total is `total`. Each feature sums its rows in order, leaving
    /// out its most frequent bin, whose sums are the total minus the other bins'. A sparse
    /// feature branches around that bin (the branch is predictable); any other sends its
    /// rows, branch-free, to four scratch slots in turn, so that neither mispredicted
    /// branches nor a chain of additions to one bin hold the loop up.
    fn build(&self, rows: &[u32], ordered: &[[f64; 2]], total: &Sums, hist: &mut [Sums]) {
        let fill = |scratch: &mut Scratch, (f, h): &mut (usize, &mut [Sums])| {
            let column = self.data.column(*f);
            let skip = self.data.most_frequent[*f];
            let bins = h.len();
            let (sums, counts) = (&mut scratch.sums, &mut scratch.counts);
            sums[..bins].fill([0.0; 2]);
            counts[..bins].fill(0);
            if self.data.sparse[*f] {
                for (&r, gh) in rows.iter().zip(ordered) {
                    let b = column[r as usize];
                    if b != skip {
                        let k = usize::from(b);
                        sums[k][0] += gh[0];
                        sums[k][1] += gh[1];
                        counts[k] += 1;
                    }
                }
            } else {
                for (i, (&r, gh)) in rows.iter().zip(ordered).enumerate() {
                    let b = column[r as usize];
                    let k = if b == skip {
                        256 + (i & 3)
                    } else {
                        usize::from(b)
                    };
                    sums[k][0] += gh[0];
                    sums[k][1] += gh[1];
                    counts[k] += 1;
                }
            }
            let mut rest = *total;
            for (k, s) in h.iter_mut().enumerate() {
                *s = Sums {
                    g: sums[k][0],
                    h: sums[k][1],
                    c: counts[k],
                };
                if k != usize::from(skip) {
                    rest = rest.minus(s);
                }
            }
            h[usize::from(skip)] = rest;
        };
        let mut parts = self.per_feature(hist);
        if rows.len() * parts.len() >= PARALLEL_WORK {
            parts
                .par_iter_mut()
                .with_min_len(8)
                .for_each_init(Scratch::new, fill);
        } else {
            let mut scratch = Scratch::new();
            parts.iter_mut().for_each(|part| fill(&mut scratch, part));
        }
    }
}

/// One feature's histogram while it is built: a slot per possible bin (indexed by a `u8`
/// without bounds checks) and four scratch slots for the rows of the most frequent bin.
struct Scratch {
    sums: Box<[[f64; 2]; 260]>,
    counts: Box<[u32; 260]>,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            sums: Box::new([[0.0; 2]; 260]),
            counts: Box::new([0; 260]),
        }
    }
}

/// Grows one tree on `rows` (the bagged rows) over the `features` allowed for it.
pub(crate) fn grow(
    data: &Binned,
    grad: &[f64],
    hess: &[f64],
    rows: Vec<u32>,
    features: &[usize],
    p: &GbdtParams,
) -> Tree {
    TreeLearner::new(data, grad, hess, features, p).train(rows)
}

/// A leaf that can still be split, and its best split.
struct OpenLeaf {
    rows: Vec<u32>,
    depth: usize,
    /// Per feature, its bins' sums (the layout's `offsets` index it).
    hist: Vec<Sums>,
    best: Split,
    /// Where the leaf sits in the tree being built.
    node: usize,
}

/// Grows one tree, in the steps of LightGBM's `SerialTreeLearner`: [`Self::before_train`]
/// (the root's sums, histogram and best split), then, while the tree may have more leaves,
/// the open leaf with the best split ([`Self::best_leaf`]) is split ([`Self::split`]: its
/// rows partitioned, the smaller child's histogram constructed and the larger child's taken
/// by subtraction, each child's best split found by [`Self::find_best_split`]).
struct TreeLearner<'a> {
    data: &'a Binned,
    grad: &'a [f64],
    hess: &'a [f64],
    params: &'a GbdtParams,
    layout: Layout<'a>,
    /// Histogram buffers of leaves that are split or cannot be, for reuse.
    pool: Vec<Vec<Sums>>,
    /// Gradients and hessians of the rows a histogram is being built over, in row order.
    ordered: Vec<[f64; 2]>,
    /// The tree so far, and the rows reaching each node (TreeSHAP's covers).
    built: Vec<Built>,
    cover: Vec<f64>,
    /// The leaves that can still split, in LightGBM's leaf-index order (its ties go to the
    /// lower index). Leaves that cannot are not kept: their histograms go back to the pool.
    open: Vec<OpenLeaf>,
    leaves: usize,
}

impl<'a> TreeLearner<'a> {
    fn new(
        data: &'a Binned,
        grad: &'a [f64],
        hess: &'a [f64],
        features: &'a [usize],
        params: &'a GbdtParams,
    ) -> Self {
        TreeLearner {
            data,
            grad,
            hess,
            params,
            layout: Layout::new(data, features),
            pool: Vec::new(),
            ordered: Vec::new(),
            built: Vec::new(),
            cover: Vec::new(),
            open: Vec::new(),
            leaves: 0,
        }
    }

    /// Grows the tree on `rows`.
    fn train(mut self, rows: Vec<u32>) -> Tree {
        self.before_train(rows);
        while self.leaves < self.params.leaves {
            let Some(i) = self.best_leaf() else {
                break;
            };
            self.split(i);
        }
        self.into_tree()
    }

    /// The root: its sums, its histogram and its best split.
    fn before_train(&mut self, rows: Vec<u32>) {
        let mut sums = Sums::default();
        for &r in &rows {
            sums.g += self.grad[r as usize];
            sums.h += self.hess[r as usize];
            sums.c += 1;
        }
        let mut hist = self.take_buffer();
        self.construct_histogram(&rows, &sums, &mut hist);
        self.built.push(Built::Leaf(self.leaf_value(&sums)));
        self.cover.push(rows.len() as f64);
        self.leaves = 1;
        self.open_leaf(rows, 0, hist, &sums, 0, 0);
    }

    /// The open leaf with the largest gain (the first on ties).
    fn best_leaf(&self) -> Option<usize> {
        self.open
            .iter()
            .enumerate()
            .map(|(i, l)| (i, l.best.gain))
            .fold(None, |acc: Option<(usize, f64)>, (i, g)| match acc {
                Some((_, ag)) if ag >= g => acc,
                _ => Some((i, g)),
            })
            .map(|(i, _)| i)
    }

    /// Splits open leaf `i` by its best split. The left child takes the parent's place among
    /// the open leaves and the right child goes last, so the open leaves keep LightGBM's
    /// leaf-index order.
    fn split(&mut self, i: usize) {
        let leaf = self.open.remove(i);
        self.leaves += 1;
        let split = leaf.best;
        let column = self.data.column(split.feature);
        let missing_bin = self.data.features[split.feature].missing();
        let (left_rows, right_rows): (Vec<u32>, Vec<u32>) = leaf.rows.iter().partition(|&&r| {
            let b = usize::from(column[r as usize]);
            if b == missing_bin {
                split.missing_left
            } else {
                b <= split.bin
            }
        });
        // Histograms: construct the smaller child's; the larger child's is the parent's
        // minus it, in the parent's buffer.
        let small_is_left = left_rows.len() <= right_rows.len();
        let (small_rows, small_sums) = if small_is_left {
            (&left_rows, &split.left)
        } else {
            (&right_rows, &split.right)
        };
        let mut small_hist = self.take_buffer();
        self.construct_histogram(small_rows, small_sums, &mut small_hist);
        let mut large_hist = leaf.hist;
        for (a, b) in large_hist.iter_mut().zip(&small_hist) {
            *a = a.minus(b);
        }
        let (left_hist, right_hist) = if small_is_left {
            (small_hist, large_hist)
        } else {
            (large_hist, small_hist)
        };
        let (l_node, r_node) = (self.built.len(), self.built.len() + 1);
        self.built.push(Built::Leaf(self.leaf_value(&split.left)));
        self.built.push(Built::Leaf(self.leaf_value(&split.right)));
        self.cover.push(left_rows.len() as f64);
        self.cover.push(right_rows.len() as f64);
        self.built[leaf.node] = Built::Split {
            feature: split.feature,
            bin: split.bin,
            missing_left: split.missing_left,
            saw_missing: split.saw_missing,
            left: l_node,
            right: r_node,
        };
        let depth = leaf.depth + 1;
        self.open_leaf(left_rows, depth, left_hist, &split.left, l_node, i);
        self.open_leaf(
            right_rows,
            depth,
            right_hist,
            &split.right,
            r_node,
            usize::MAX,
        );
    }

    /// Keeps a new leaf open at position `at` (at most the end) if it has a split, else
    /// returns its histogram to the pool.
    fn open_leaf(
        &mut self,
        rows: Vec<u32>,
        depth: usize,
        hist: Vec<Sums>,
        sums: &Sums,
        node: usize,
        at: usize,
    ) {
        match self.find_best_split(&hist, sums, depth) {
            Some(best) => self.open.insert(
                at.min(self.open.len()),
                OpenLeaf {
                    rows,
                    depth,
                    hist,
                    best,
                    node,
                },
            ),
            None => self.pool.push(hist),
        }
    }

    fn take_buffer(&mut self) -> Vec<Sums> {
        self.pool
            .pop()
            .unwrap_or_else(|| vec![Sums::default(); self.layout.len()])
    }

    /// Fills `hist` with the sums of `rows`, whose total is `total`.
    fn construct_histogram(&mut self, rows: &[u32], total: &Sums, hist: &mut [Sums]) {
        self.ordered.clear();
        self.ordered.extend(
            rows.iter()
                .map(|&r| [self.grad[r as usize], self.hess[r as usize]]),
        );
        self.layout.build(rows, &self.ordered, total, hist);
    }

    /// `−G/(H + λ)·η`.
    fn leaf_value(&self, s: &Sums) -> f64 {
        let denom = s.h + self.params.lambda_l2;
        if denom > 0.0 {
            -s.g / denom * self.params.tree_lr
        } else {
            0.0
        }
    }

    /// `G²/(H + λ)`, a node's term of the gain.
    fn score(&self, s: &Sums) -> f64 {
        s.g * s.g / (s.h + self.params.lambda_l2)
    }

    /// The best split of a leaf with histogram `hist`, sums `sums` at `depth`, over every
    /// feature of the tree, reduced in feature order (ties go to the lower feature).
    fn find_best_split(&self, hist: &[Sums], sums: &Sums, depth: usize) -> Option<Split> {
        let p = self.params;
        if depth >= p.depth_limit() {
            return None;
        }
        if (sums.c as usize) < 2 * p.min_data_in_leaf.max(1) {
            return None;
        }
        let features = self.layout.features.len();
        let search = |k: usize| {
            let h = &hist[self.layout.offsets[k]..self.layout.offsets[k + 1]];
            self.find_best_threshold(self.layout.features[k], h, sums)
        };
        let better = |best: Option<Split>, s: Option<Split>| match (best, s) {
            (Some(b), Some(s)) if b.gain >= s.gain => Some(b),
            (b, None) => b,
            (_, s) => s,
        };
        if sums.c as usize * features >= PARALLEL_WORK {
            (0..features)
                .into_par_iter()
                .with_min_len(8)
                .map(search)
                .collect::<Vec<_>>()
                .into_iter()
                .fold(None, better)
        } else {
            (0..features).map(search).fold(None, better)
        }
    }

    /// The best split of feature `f` (bins `h`, the missing bin last) of a leaf with sums
    /// `sums`: every threshold, with the missing values on either side when there are any.
    fn find_best_threshold(&self, f: usize, h: &[Sums], sums: &Sums) -> Option<Split> {
        let p = self.params;
        let parent = self.score(sums);
        let min_rows = p.min_data_in_leaf as i64;
        // LightGBM's row estimate of a bin: round(hessian · rows / hessian of the leaf).
        let factor = f64::from(sums.c) / sums.h;
        let estimate = |s: &Sums| (s.h * factor).round() as i64;
        let regular = h.len() - 1;
        let missing = h[regular];
        let mut best: Option<Split> = None;
        let sides: &[bool] = if missing.c > 0 {
            &[false, true]
        } else {
            &[false]
        };
        let estimate_all: i64 = if p.count_from_hessian {
            h.iter().map(estimate).sum()
        } else {
            0
        };
        for &missing_left in sides {
            // Within one pass, equal gains go to the larger threshold, as in LightGBM's
            // scan from the right (FindBestThresholdSequentially): thresholds that differ
            // only by bins without hessian (rows of queries that give no gradient, or
            // out of the bag) split the gradient the same way.
            let mut pass_best: Option<Split> = None;
            let mut left = if missing_left {
                missing
            } else {
                Sums::default()
            };
            let mut left_estimate = if missing_left && p.count_from_hessian {
                estimate(&missing)
            } else {
                0
            };
            // Bin `regular − 1` puts every regular value left: only a split when the
            // missing values go right.
            let last = if missing.c > 0 && !missing_left {
                regular
            } else {
                regular - 1
            };
            for (bin, s) in h.iter().enumerate().take(last) {
                left.add(s);
                let right = sums.minus(&left);
                let (left_rows, right_rows) = if p.count_from_hessian {
                    // As LightGBM: the right side's estimate, the rest to the left.
                    left_estimate += estimate(s);
                    let right_estimate = estimate_all - left_estimate;
                    (i64::from(sums.c) - right_estimate, right_estimate)
                } else {
                    (i64::from(left.c), i64::from(right.c))
                };
                if left_rows < min_rows
                    || right_rows < min_rows
                    || left.h < p.min_sum_hessian
                    || right.h < p.min_sum_hessian
                {
                    continue;
                }
                let gain =
                    0.5 * (self.score(&left) + self.score(&right) - parent) - p.min_split_gain;
                if gain > 0.0 && pass_best.is_none_or(|b| gain >= b.gain) {
                    pass_best = Some(Split {
                        gain,
                        feature: f,
                        bin,
                        missing_left,
                        saw_missing: missing.c > 0,
                        left,
                        right,
                    });
                }
            }
            if let Some(s) = pass_best {
                if best.is_none_or(|b| s.gain > b.gain) {
                    best = Some(s);
                }
            }
        }
        best
    }

    /// The tree as [`Node`]s: bins become thresholds.
    fn into_tree(self) -> Tree {
        let data = self.data;
        let nodes = self
            .built
            .into_iter()
            .map(|b| match b {
                Built::Leaf(value) => Node::Leaf { value },
                Built::Split {
                    feature,
                    bin,
                    missing_left,
                    saw_missing,
                    left,
                    right,
                } => {
                    let fb = &data.features[feature];
                    // The last regular bin as a threshold (missing values right, the rest
                    // left): split at the largest training value, so values never seen above
                    // it go with the missing ones.
                    let threshold = fb.thresholds.get(bin).copied().unwrap_or(fb.upper);
                    Node::Split {
                        feature: feature as u32,
                        threshold,
                        nan_left: if saw_missing {
                            missing_left
                        } else {
                            usize::from(fb.bin(0.0)) <= bin
                        },
                        zero_missing: false,
                        left: left as u32,
                        right: right as u32,
                    }
                }
            })
            .collect();
        Tree {
            nodes,
            cover: self.cover,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Thresholds that differ only by bins without hessian split the gradient alike; the
    /// split is then at the largest of them, as LightGBM's scan from the right leaves it
    /// (and so rankd's trees and LightGBM's agree on such ties).
    #[test]
    fn equal_gains_go_to_the_larger_threshold() {
        // One feature: 0.1, 0.2, 0.3, 0.4 five rows each; the 0.2 and 0.3 rows carry no
        // gradient and no hessian (their query gives none).
        let x: Vec<f32> = [0.1f32, 0.2, 0.3, 0.4]
            .iter()
            .flat_map(|&v| std::iter::repeat_n(v, 5))
            .collect();
        let data = Binned::new(&x, 1, 255, 1);
        let grad: Vec<f64> = x
            .iter()
            .map(|&v| match v {
                0.1 => -1.0,
                0.4 => 1.0,
                _ => 0.0,
            })
            .collect();
        let hess: Vec<f64> = x
            .iter()
            .map(|&v| if v == 0.2 || v == 0.3 { 0.0 } else { 1.0 })
            .collect();
        for count_from_hessian in [false, true] {
            let p = GbdtParams {
                leaves: 2,
                max_depth: 0,
                min_data_in_leaf: 1,
                count_from_hessian,
                min_sum_hessian: 0.0,
                lambda_l2: 0.0,
                min_split_gain: 0.0,
                tree_lr: 1.0,
                ..GbdtParams::default()
            };
            let tree = grow(&data, &grad, &hess, (0..20).collect(), &[0], &p);
            match tree.nodes[0] {
                Node::Split { threshold, .. } => assert_eq!(threshold, 0.35),
                ref other => panic!("no split: {other:?}"),
            }
        }
    }

    /// Histograms (sparse features branching around their most frequent bin, dense ones
    /// branch-free, on one thread and in parallel) against sums taken row by row.
    #[test]
    fn histograms_are_the_row_by_row_sums() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let (n, d) = (12_000, 6);
        // Feature 0: 95 % zeros; 1: 50 % zeros; 2: uniform over 200 values; 3: two values;
        // 4: NaN in a third of the rows; 5: constant.
        let mut x = vec![0f32; n * d];
        for r in 0..n {
            let row = &mut x[r * d..(r + 1) * d];
            row[0] = if rng.random_bool(0.95) {
                0.0
            } else {
                rng.random_range(1..50) as f32
            };
            row[1] = if rng.random_bool(0.5) {
                0.0
            } else {
                rng.random_range(1..9) as f32
            };
            row[2] = rng.random_range(0..200) as f32;
            row[3] = f32::from(u8::from(rng.random_bool(0.3)));
            row[4] = if rng.random_bool(0.33) {
                f32::NAN
            } else {
                rng.random::<f32>()
            };
            row[5] = 7.0;
        }
        let data = Binned::new(&x, d, 255, 1);
        assert!(data.sparse[0] && !data.sparse[1] && !data.sparse[2]);
        let grad: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let hess: Vec<f64> = (0..n).map(|_| rng.random_range(0.0..1.0)).collect();
        let features: Vec<usize> = (0..d).collect();
        let layout = Layout::new(&data, &features);
        // Small leaves run on one thread, large ones in parallel (PARALLEL_WORK).
        for share in [0.01, 0.2, 1.0] {
            let rows: Vec<u32> = (0..n as u32).filter(|_| rng.random_bool(share)).collect();
            let ordered: Vec<[f64; 2]> = rows
                .iter()
                .map(|&r| [grad[r as usize], hess[r as usize]])
                .collect();
            let mut total = Sums::default();
            for gh in &ordered {
                total.add(&Sums {
                    g: gh[0],
                    h: gh[1],
                    c: 1,
                });
            }
            // Garbage in the buffer first: build must overwrite all of it.
            let mut hist = vec![
                Sums {
                    g: 9.0,
                    h: 9.0,
                    c: 9
                };
                layout.len()
            ];
            layout.build(&rows, &ordered, &total, &mut hist);
            for (k, &f) in features.iter().enumerate() {
                let mut want = vec![Sums::default(); data.features[f].regular() + 1];
                for &r in &rows {
                    let s = &mut want[usize::from(data.column(f)[r as usize])];
                    s.g += grad[r as usize];
                    s.h += hess[r as usize];
                    s.c += 1;
                }
                let got = &hist[layout.offsets[k]..layout.offsets[k + 1]];
                for (b, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(g.c, w.c, "feature {f} bin {b}, share {share}");
                    assert!((g.g - w.g).abs() < 1e-9, "feature {f} bin {b}: {g:?} {w:?}");
                    assert!((g.h - w.h).abs() < 1e-9, "feature {f} bin {b}: {g:?} {w:?}");
                }
            }
        }
    }
}
