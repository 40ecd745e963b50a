//! Per-feature contributions of a tree model's score: path-dependent TreeSHAP (Lundberg,
//! Erion and Lee 2018, Algorithm 2), the explanation `/search?explain=true` shows for trees.
//!
//! φ_i are the Shapley values of the game whose value for a feature set S is the expected
//! score given `x_S`, the expectation taken over the tree's own training distribution: at a
//! split on a feature outside S, both branches are followed, weighted by the share of the
//! node's cover each child received. They add up to the score: `Σ φ_i + E[f] = f(x)`, where
//! E[f] (the expected value, [`expected_value`]) is the cover-weighted mean leaf. This is what
//! XGBoost's `pred_contribs` and LightGBM's `pred_contrib` compute, each with its own covers
//! (hessian sums and row counts). It needs covers: a tree without them (RankLib files) has no
//! contributions.
//!
//! The algorithm is O(L·D²) per tree (L leaves, D depth). Written here: no maintained Rust
//! crate computes TreeSHAP over a foreign tree structure.

use super::forest::{Forest, Node, Route, Tree};

/// One step of the path from the root, as Algorithm 2 keeps it.
#[derive(Debug, Clone, Copy)]
struct PathElement {
    /// The split feature, or `usize::MAX` for the root's dummy element.
    feature: usize,
    /// The share of the data (cover) that follows this path when the feature is unknown.
    zero_fraction: f64,
    /// 1 when `x` follows this path, 0 when it does not.
    one_fraction: f64,
    /// The proportion of feature subsets of each size that reach here.
    weight: f64,
}

fn extend(path: &mut Vec<PathElement>, zero: f64, one: f64, feature: usize) {
    let d = path.len();
    path.push(PathElement {
        feature,
        zero_fraction: zero,
        one_fraction: one,
        weight: if d == 0 { 1.0 } else { 0.0 },
    });
    for i in (0..d).rev() {
        path[i + 1].weight += one * path[i].weight * (i + 1) as f64 / (d + 1) as f64;
        path[i].weight = zero * path[i].weight * (d - i) as f64 / (d + 1) as f64;
    }
}

/// Removes element `at` from the path, undoing its [`extend`].
fn unwind(path: &mut Vec<PathElement>, at: usize) {
    let d = path.len() - 1;
    let (one, zero) = (path[at].one_fraction, path[at].zero_fraction);
    let mut next = path[d].weight;
    for i in (0..d).rev() {
        if one != 0.0 {
            let w = path[i].weight;
            path[i].weight = next * (d + 1) as f64 / ((i + 1) as f64 * one);
            next = w - path[i].weight * zero * (d - i) as f64 / (d + 1) as f64;
        } else {
            path[i].weight = path[i].weight * (d + 1) as f64 / (zero * (d - i) as f64);
        }
    }
    for i in at..d {
        path[i].feature = path[i + 1].feature;
        path[i].zero_fraction = path[i + 1].zero_fraction;
        path[i].one_fraction = path[i + 1].one_fraction;
    }
    path.pop();
}

/// The total weight the path would have with element `at` unwound.
fn unwound_sum(path: &[PathElement], at: usize) -> f64 {
    let d = path.len() - 1;
    let (one, zero) = (path[at].one_fraction, path[at].zero_fraction);
    let mut next = path[d].weight;
    let mut total = 0.0;
    for i in (0..d).rev() {
        if one != 0.0 {
            let w = next * (d + 1) as f64 / ((i + 1) as f64 * one);
            total += w;
            next = path[i].weight - w * zero * (d - i) as f64 / (d + 1) as f64;
        } else if zero != 0.0 {
            total += path[i].weight / zero * (d + 1) as f64 / (d - i) as f64;
        }
    }
    total
}

/// A node still to visit: the path above it, and the split on `feature` that led here (its
/// zero and one fractions), which extends that path when the node is visited.
struct Pending {
    node: usize,
    path: Vec<PathElement>,
    zero: f64,
    one: f64,
    feature: usize,
}

/// One row's walk down one tree, adding each feature's share to `phi`. Algorithm 2 is
/// recursive; this walk keeps its own stack instead, so a tree as deep as an upload allows
/// ([`super::forest::MAX_TREE_DEPTH`]) needs no thread stack, and visits the nodes in the
/// recursion's order (the taken child first), so `phi` is summed in the same order.
fn walk(tree: &Tree, x: &[f32], phi: &mut [f64]) {
    let mut stack = vec![Pending {
        node: 0,
        path: Vec::new(),
        zero: 1.0,
        one: 1.0,
        feature: usize::MAX,
    }];
    while let Some(Pending {
        node,
        mut path,
        zero,
        one,
        feature,
    }) = stack.pop()
    {
        extend(&mut path, zero, one, feature);
        match tree.nodes[node].route(x) {
            None => {
                let value = tree.nodes[node].leaf_value();
                for i in 1..path.len() {
                    let w = unwound_sum(&path, i);
                    let e = path[i];
                    phi[e.feature] += w * (e.one_fraction - e.zero_fraction) * value;
                }
            }
            Some(Route {
                feature: f,
                taken: hot,
                other: cold,
            }) => {
                let w = tree.cover[node];
                let (hot_zero, cold_zero) = (tree.cover[hot] / w, tree.cover[cold] / w);
                let (mut in_zero, mut in_one) = (1.0, 1.0);
                // A feature split on again above: undo that step, its fractions carry over.
                if let Some(k) = path.iter().skip(1).position(|e| e.feature == f) {
                    let k = k + 1;
                    in_zero = path[k].zero_fraction;
                    in_one = path[k].one_fraction;
                    unwind(&mut path, k);
                }
                // Popped last, visited after the whole taken subtree.
                stack.push(Pending {
                    node: cold,
                    path: path.clone(),
                    zero: cold_zero * in_zero,
                    one: 0.0,
                    feature: f,
                });
                stack.push(Pending {
                    node: hot,
                    path,
                    zero: hot_zero * in_zero,
                    one: in_one,
                    feature: f,
                });
            }
        }
    }
}

/// The cover-weighted mean leaf value of a tree (its E[f]).
fn tree_expected_value(tree: &Tree) -> f64 {
    let root = tree.cover[0];
    tree.nodes
        .iter()
        .zip(&tree.cover)
        .filter_map(|(n, c)| match n {
            Node::Leaf { value } => Some(value * c / root),
            Node::Split { .. } => None,
        })
        .sum()
}

/// Whether every tree carries covers (TreeSHAP needs them).
pub(crate) fn has_covers(forest: &Forest) -> bool {
    forest
        .trees
        .iter()
        .all(|t| t.cover.len() == t.nodes.len() || (t.nodes.len() == 1 && t.cover.is_empty()))
}

/// The forest's expected score E[f] = base score + Σ trees' cover-weighted mean leaf; `None`
/// without covers.
pub fn expected_value(forest: &Forest) -> Option<f64> {
    has_covers(forest).then(|| {
        forest.base_score
            + forest
                .trees
                .iter()
                .map(|t| match t.nodes[..] {
                    [Node::Leaf { value }] => value,
                    _ => tree_expected_value(t),
                })
                .sum::<f64>()
    })
}

/// Each feature's contribution φ to the score of `row`; `None` without covers.
/// `Σ φ + expected_value = predict_row(row)` up to rounding.
pub fn contributions(forest: &Forest, row: &[f32]) -> Option<Vec<f64>> {
    if !has_covers(forest) {
        return None;
    }
    let mut phi = vec![0.0; forest.num_features];
    for tree in &forest.trees {
        if tree.nodes.len() > 1 {
            walk(tree, row, &mut phi);
        }
    }
    Some(phi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// E[f(x) | x_S] by Algorithm 1 of the paper: follow `x` at splits on features in S,
    /// both children weighted by cover elsewhere.
    fn conditional(tree: &Tree, x: &[f32], in_s: &[bool], node: usize) -> f64 {
        match tree.nodes[node].route(x) {
            None => tree.nodes[node].leaf_value(),
            Some(Route {
                feature,
                taken,
                other,
            }) => {
                if in_s[feature] {
                    conditional(tree, x, in_s, taken)
                } else {
                    let (l, r) = (taken, other);
                    (tree.cover[l] * conditional(tree, x, in_s, l)
                        + tree.cover[r] * conditional(tree, x, in_s, r))
                        / tree.cover[node]
                }
            }
        }
    }

    /// Shapley values by their definition: every subset of the other features.
    fn brute_force(forest: &Forest, x: &[f32]) -> Vec<f64> {
        let m = forest.num_features;
        let value = |mask: usize| -> f64 {
            let in_s: Vec<bool> = (0..m).map(|f| mask >> f & 1 == 1).collect();
            forest.base_score
                + forest
                    .trees
                    .iter()
                    .map(|t| conditional(t, x, &in_s, 0))
                    .sum::<f64>()
        };
        let fact = |n: usize| (1..=n).map(|k| k as f64).product::<f64>();
        let mut phi = vec![0.0; m];
        for (i, p) in phi.iter_mut().enumerate() {
            for mask in 0..(1usize << m) {
                if mask >> i & 1 == 1 {
                    continue;
                }
                let s = mask.count_ones() as usize;
                let weight = fact(s) * fact(m - s - 1) / fact(m);
                *p += weight * (value(mask | 1 << i) - value(mask));
            }
        }
        phi
    }

    /// A random tree over `m` features with random covers that add up at every split, and
    /// features repeated along paths.
    fn random_tree(rng: &mut ChaCha8Rng, m: usize, leaves: usize) -> Tree {
        let mut nodes = vec![Node::Leaf { value: 0.0 }];
        let mut cover: Vec<f64> = vec![1000.0];
        let mut open = vec![0usize];
        for _ in 1..leaves {
            let at = open.swap_remove(rng.random_range(0..open.len()));
            let (l, r) = (nodes.len(), nodes.len() + 1);
            let share: f64 = rng.random_range(0.05..0.95);
            let c = cover[at];
            nodes.push(Node::Leaf { value: 0.0 });
            nodes.push(Node::Leaf { value: 0.0 });
            cover.push((c * share).round().max(1.0));
            cover.push((c - cover[l]).max(1.0));
            nodes[at] = Node::Split {
                feature: rng.random_range(0..m) as u32,
                threshold: rng.random_range(-1.0..1.0),
                nan_left: rng.random_bool(0.5),
                zero_missing: false,
                left: l as u32,
                right: r as u32,
            };
            open.push(l);
            open.push(r);
        }
        // Covers of the splits as the sums of their children (bottom-up: children follow parents).
        for i in (0..nodes.len()).rev() {
            if let Node::Split { left, right, .. } = nodes[i] {
                cover[i] = cover[left as usize] + cover[right as usize];
            }
        }
        for n in nodes.iter_mut() {
            if let Node::Leaf { value } = n {
                *value = rng.random_range(-2.0..2.0);
            }
        }
        Tree { nodes, cover }
    }

    #[test]
    fn tree_shap_equals_the_shapley_values_by_definition() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for case in 0..40 {
            let m = 1 + case % 6;
            let forest = Forest {
                num_features: m,
                base_score: rng.random_range(-1.0..1.0),
                trees: (0..1 + case % 3)
                    .map(|_| {
                        let leaves = 2 + rng.random_range(0..12);
                        random_tree(&mut rng, m, leaves)
                    })
                    .collect(),
            };
            forest.validate().unwrap();
            for _ in 0..5 {
                let x: Vec<f32> = (0..m)
                    .map(|_| {
                        if rng.random_bool(0.1) {
                            f32::NAN
                        } else {
                            rng.random_range(-1.2..1.2)
                        }
                    })
                    .collect();
                let phi = contributions(&forest, &x).unwrap();
                let want = brute_force(&forest, &x);
                for (a, b) in phi.iter().zip(&want) {
                    assert!((a - b).abs() < 1e-9, "case {case}: {phi:?} vs {want:?}");
                }
                // Local accuracy.
                let total = phi.iter().sum::<f64>() + expected_value(&forest).unwrap();
                assert!((total - forest.predict_row(&x)).abs() < 1e-9);
            }
        }
    }

    /// Issue 30, N1: a chain as deep as an upload allows, explained on a thread with a small
    /// stack (searches run on 2 MiB tokio workers; the recursive walk overflowed at ≈ 12 000).
    #[test]
    fn a_chain_as_deep_as_allowed_is_explained_without_recursion() {
        use crate::rerank::gbdt::forest::MAX_TREE_DEPTH;
        use crate::rerank::testutil::chain_tree;
        let m = 3;
        for depth in [MAX_TREE_DEPTH, 20_000] {
            let forest = Forest {
                num_features: m,
                base_score: 0.0,
                trees: vec![chain_tree(depth, m)],
            };
            let x = vec![1.0f32; m];
            let phi = std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || {
                    let phi = contributions(&forest, &x).unwrap();
                    let total = phi.iter().sum::<f64>() + expected_value(&forest).unwrap();
                    assert!((total - forest.predict_row(&x)).abs() < 1e-6 * depth as f64);
                    phi
                })
                .unwrap()
                .join()
                .unwrap();
            assert!(phi.iter().all(|p| p.is_finite()));
        }
    }

    #[test]
    fn no_covers_no_contributions() {
        let forest = Forest {
            num_features: 2,
            base_score: 0.0,
            trees: vec![crate::rerank::testutil::small_tree()],
        };
        let mut bare = forest.clone();
        bare.trees[0].cover.clear();
        assert_eq!(contributions(&bare, &[0.0, 0.0]), None);
        assert_eq!(expected_value(&bare), None);
    }
}
