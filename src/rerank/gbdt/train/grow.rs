//! One regression tree grown leaf-wise on histograms (SPEC §3.6; LightGBM's algorithm):
//! every leaf knows its best split; the leaf whose best split gains most is split next,
//! until the tree has `num_leaves` leaves or no split gains. A leaf's histogram holds, per
//! feature and bin, the sums of gradients, hessians and rows; the smaller child's is built
//! from its rows and the larger child's is the parent's minus it.
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
use crate::rerank::gbdt::forest::{Node, Tree};

/// What growing a tree needs besides the data.
#[derive(Debug, Clone)]
pub struct GrowParams {
    pub num_leaves: usize,
    /// 0: unlimited.
    pub max_depth: usize,
    pub min_data_in_leaf: usize,
    /// Check `min_data_in_leaf` against LightGBM's estimate of a child's rows (each bin's
    /// hessian times the leaf's rows per unit of hessian, rounded; LightGBM's histograms
    /// keep no counts) instead of the true count: for parity runs against LightGBM.
    pub count_from_hessian: bool,
    pub min_sum_hessian: f64,
    pub lambda_l2: f64,
    pub min_split_gain: f64,
    pub learning_rate: f64,
}

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

struct Leaf {
    rows: Vec<u32>,
    depth: usize,
    /// Per feature, its bins' sums (`offsets` index it).
    hist: Vec<Sums>,
    best: Option<Split>,
    /// Where the leaf sits in the tree being built.
    node: usize,
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

/// Grows one tree on `rows` (the bagged rows) over the `features` allowed for it.
pub fn grow(
    data: &Binned,
    grad: &[f64],
    hess: &[f64],
    rows: Vec<u32>,
    features: &[usize],
    p: &GrowParams,
) -> Tree {
    let offsets: Vec<usize> = data
        .features
        .iter()
        .scan(0, |acc, fb| {
            let at = *acc;
            *acc += fb.regular() + 1;
            Some(at)
        })
        .collect();
    let total_bins = data
        .features
        .iter()
        .map(|fb| fb.regular() + 1)
        .sum::<usize>();
    let build_hist = |rows: &[u32]| -> Vec<Sums> {
        let per_feature: Vec<(usize, Vec<Sums>)> = features
            .par_iter()
            .map(|&f| {
                let column = data.column(f);
                let mut h = vec![Sums::default(); data.features[f].regular() + 1];
                for &r in rows {
                    let r = r as usize;
                    let s = &mut h[usize::from(column[r])];
                    s.g += grad[r];
                    s.h += hess[r];
                    s.c += 1;
                }
                (f, h)
            })
            .collect();
        let mut hist = vec![Sums::default(); total_bins];
        for (f, h) in per_feature {
            hist[offsets[f]..offsets[f] + h.len()].copy_from_slice(&h);
        }
        hist
    };
    let leaf_value = |s: &Sums| {
        let denom = s.h + p.lambda_l2;
        if denom > 0.0 {
            -s.g / denom * p.learning_rate
        } else {
            0.0
        }
    };
    let score = |s: &Sums| s.g * s.g / (s.h + p.lambda_l2);
    let best_split = |hist: &[Sums], sums: &Sums, depth: usize| -> Option<Split> {
        if p.max_depth > 0 && depth >= p.max_depth {
            return None;
        }
        if (sums.c as usize) < 2 * p.min_data_in_leaf.max(1) {
            return None;
        }
        let parent = score(sums);
        let candidates: Vec<Option<Split>> = features
            .par_iter()
            .map(|&f| {
                let regular = data.features[f].regular();
                let h = &hist[offsets[f]..offsets[f] + regular + 1];
                let missing = h[regular];
                let mut best: Option<Split> = None;
                let sides: &[bool] = if missing.c > 0 {
                    &[false, true]
                } else {
                    &[false]
                };
                // LightGBM's row estimate of a bin: round(hessian · rows / hessian of the leaf).
                let factor = f64::from(sums.c) / sums.h;
                let estimate = |s: &Sums| (s.h * factor).round() as i64;
                let estimate_all: i64 = h.iter().map(estimate).sum();
                for &missing_left in sides {
                    let mut left = if missing_left {
                        missing
                    } else {
                        Sums::default()
                    };
                    let mut left_estimate = if missing_left { estimate(&missing) } else { 0 };
                    // Bin `regular − 1` puts every regular value left: only a split when
                    // the missing values go right.
                    let last = if missing.c > 0 && !missing_left {
                        regular
                    } else {
                        regular - 1
                    };
                    for (bin, s) in h.iter().enumerate().take(last) {
                        left.add(s);
                        left_estimate += estimate(s);
                        let right = sums.minus(&left);
                        let (left_rows, right_rows) = if p.count_from_hessian {
                            // As LightGBM: the right side's estimate, the rest to the left.
                            let right_estimate = estimate_all - left_estimate;
                            (i64::from(sums.c) - right_estimate, right_estimate)
                        } else {
                            (i64::from(left.c), i64::from(right.c))
                        };
                        let min_rows = p.min_data_in_leaf as i64;
                        if left_rows < min_rows
                            || right_rows < min_rows
                            || left.h < p.min_sum_hessian
                            || right.h < p.min_sum_hessian
                        {
                            continue;
                        }
                        let gain = 0.5 * (score(&left) + score(&right) - parent) - p.min_split_gain;
                        if gain > 0.0 && best.is_none_or(|b| gain > b.gain) {
                            best = Some(Split {
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
                }
                best
            })
            .collect();
        candidates
            .into_iter()
            .flatten()
            .fold(None, |best: Option<Split>, s| match best {
                Some(b) if b.gain >= s.gain => Some(b),
                _ => Some(s),
            })
    };

    let mut sums = Sums::default();
    for &r in &rows {
        sums.g += grad[r as usize];
        sums.h += hess[r as usize];
        sums.c += 1;
    }
    let hist = build_hist(&rows);
    let best = best_split(&hist, &sums, 0);
    let mut built = vec![Built::Leaf(leaf_value(&sums))];
    // Rows reaching each node (TreeSHAP's covers).
    let mut cover = vec![rows.len() as f64];
    let mut leaves = vec![Leaf {
        rows,
        depth: 0,
        hist,
        best,
        node: 0,
    }];
    while leaves.len() < p.num_leaves {
        // The open leaf with the largest gain (the first on ties).
        let Some(i) = leaves
            .iter()
            .enumerate()
            .filter_map(|(i, l)| l.best.map(|b| (i, b.gain)))
            .fold(None, |acc: Option<(usize, f64)>, (i, g)| match acc {
                Some((_, ag)) if ag >= g => acc,
                _ => Some((i, g)),
            })
            .map(|(i, _)| i)
        else {
            break;
        };
        let leaf = leaves.swap_remove(i);
        let split = leaf.best.expect("chosen for its split");
        let column = data.column(split.feature);
        let missing_bin = data.features[split.feature].missing();
        let (left_rows, right_rows): (Vec<u32>, Vec<u32>) = leaf.rows.iter().partition(|&&r| {
            let b = usize::from(column[r as usize]);
            if b == missing_bin {
                split.missing_left
            } else {
                b <= split.bin
            }
        });
        // Histograms: build the smaller child, subtract for the larger.
        let (small_rows, small_is_left) = if left_rows.len() <= right_rows.len() {
            (&left_rows, true)
        } else {
            (&right_rows, false)
        };
        let small_hist = build_hist(small_rows);
        let large_hist: Vec<Sums> = leaf
            .hist
            .iter()
            .zip(&small_hist)
            .map(|(a, b)| a.minus(b))
            .collect();
        let (left_hist, right_hist) = if small_is_left {
            (small_hist, large_hist)
        } else {
            (large_hist, small_hist)
        };
        let (l_node, r_node) = (built.len(), built.len() + 1);
        built.push(Built::Leaf(leaf_value(&split.left)));
        built.push(Built::Leaf(leaf_value(&split.right)));
        cover.push(left_rows.len() as f64);
        cover.push(right_rows.len() as f64);
        built[leaf.node] = Built::Split {
            feature: split.feature,
            bin: split.bin,
            missing_left: split.missing_left,
            saw_missing: split.saw_missing,
            left: l_node,
            right: r_node,
        };
        let depth = leaf.depth + 1;
        for (rows, sums, hist, node) in [
            (left_rows, split.left, left_hist, l_node),
            (right_rows, split.right, right_hist, r_node),
        ] {
            let best = best_split(&hist, &sums, depth);
            leaves.push(Leaf {
                rows,
                depth,
                hist,
                best,
                node,
            });
        }
    }
    let nodes = built
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
    Tree { nodes, cover }
}
