//! Shared test helpers of the reranker: hand-made models, random scores, hand-made and random
//! trees, the LightGBM LETOR example and its parity fixtures, and finite-difference gradient
//! checks.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::gbdt::{Node, Tree};
use super::objective::{Objective, ObjectiveKind, QueryInput, QueryState};
use super::{Activation, ModelMetrics, Net, NormKind, Normalizer, Reranker, TrainingInfo};

// ---------------------------------------------------------------------------------------
// Models

/// The training record of a hand-made model (stable AP, one epoch).
pub(crate) fn training_info() -> TrainingInfo {
    TrainingInfo {
        objective: Objective::with_defaults(ObjectiveKind::StableAp, 0.1, 1),
        optimizer: Some(
            crate::rerank::NetworkParams {
                lr: 0.01,
                ..Default::default()
            }
            .optimizer(),
        ),
        epochs: 1,
        batch_queries: 1,
        patience: 1,
        seed: 1,
        best_epoch: 1,
        epochs_run: 1,
        ensemble: 1,
        average_epochs: 1,
        lr_halve_after: 0,
        sample_rows: None,
        mixup: None,
        member_best_epochs: vec![1],
        metrics: ModelMetrics {
            train: None,
            valid: None,
        },
        source: "test".into(),
        embedder: None,
    }
}

/// A linear model over `names` (z-score normalised on `fit`, rows of `names.len()` values)
/// scoring `weights · x̂`: a reranker whose order a test can tell in advance.
pub(crate) fn linear_model(names: &[&str], weights: &[f32], fit: &[f32]) -> Reranker {
    let d = names.len();
    let norm = Normalizer::fit(NormKind::ZScore, fit, d).unwrap();
    let mut net = Net::new(d, &[], Activation::Tanh, 1).unwrap();
    net.params = weights.iter().copied().chain([0.0]).collect();
    Reranker::new(
        names.iter().map(|n| n.to_string()).collect(),
        norm,
        vec![net],
        training_info(),
        None,
    )
    .unwrap()
}

// ---------------------------------------------------------------------------------------
// Scores

/// Scores in (0.01, 0.99), as a sigmoid gives them.
pub(crate) fn random_scores(rng: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(0.01f32..0.99)).collect()
}

// ---------------------------------------------------------------------------------------
// Trees

/// A split node (no zero band): `x[feature] ≤ threshold` goes `left`.
pub(crate) fn split(feature: u32, threshold: f32, nan_left: bool, left: u32, right: u32) -> Node {
    Node::Split {
        feature,
        threshold,
        nan_left,
        zero_missing: false,
        left,
        right,
    }
}

pub(crate) fn leaf(value: f64) -> Node {
    Node::Leaf { value }
}

/// x0 ≤ 0.5 ? (x1 ≤ −1 ? 1 : 2) : 3, NaN in x0 right, NaN in x1 left.
pub(crate) fn small_tree() -> Tree {
    Tree {
        nodes: vec![
            split(0, 0.5, false, 1, 2),
            split(1, -1.0, true, 3, 4),
            leaf(3.0),
            leaf(1.0),
            leaf(2.0),
        ],
        cover: vec![10.0, 6.0, 4.0, 2.0, 4.0],
    }
}

/// A chain `depth` splits deep over features `0..d` in turn: split `k` sends `x ≤ 0` to a
/// leaf of value `k` and the rest one split deeper; covers add up (every leaf covers 1).
/// A row of positive values walks the whole chain.
pub(crate) fn chain_tree(depth: usize, d: usize) -> Tree {
    let mut nodes = Vec::with_capacity(2 * depth + 1);
    let mut cover = Vec::with_capacity(2 * depth + 1);
    for k in 0..depth {
        let at = nodes.len() as u32;
        nodes.push(split((k % d) as u32, 0.0, true, at + 1, at + 2));
        nodes.push(leaf(k as f64));
        cover.push((depth - k + 1) as f64);
        cover.push(1.0);
    }
    nodes.push(leaf(depth as f64));
    cover.push(1.0);
    Tree { nodes, cover }
}

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
    Tree::new(nodes)
}

// ---------------------------------------------------------------------------------------
// Data

/// A fixture of the LightGBM parity tests (tests/fixtures/gbdt/, from
/// bench/gbdt_parity_fixtures.py).
pub(crate) fn parity_fixture(name: &str) -> serde_json::Value {
    let path = format!("{}/tests/fixtures/gbdt/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The LightGBM LETOR example's training file.
pub(crate) fn rank_train() -> crate::corpus::letor::LetorSet {
    let data = format!(
        "{}/../shared/data/letor-lightgbm/rank.train",
        env!("CARGO_MANIFEST_DIR")
    );
    crate::corpus::letor::read(
        std::path::Path::new(&data),
        Some(std::path::Path::new(&format!("{data}.query"))),
    )
    .unwrap()
}

// ---------------------------------------------------------------------------------------
// Gradient checks

/// The one-sided Huber ℓ of SPEC §3.3 in f64, written from the formula for the oracles
/// (the product code uses [`crate::pairwise::Loss::term`]).
pub(crate) fn huber(x: f64, tau: f64) -> f64 {
    if x < 0.0 {
        1.0 - 2.0 * x / tau
    } else if x < tau {
        (1.0 - x / tau).powi(2)
    } else {
        0.0
    }
}

/// The whole per-query path of `objective` (from raw scores g, fresh state each call)
/// against central differences, on 20 random queries with grades 0–2 (at least one 2 and
/// one 0), step 1e-3, tolerance 2e-3 of the largest component.
pub(crate) fn check_query_gradient(objective: &Objective, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for _ in 0..20 {
        let n = rng.random_range(2..10);
        let scores: Vec<f32> = (0..n).map(|_| rng.random_range(-2f32..2.0)).collect();
        let mut labels: Vec<i32> = (0..n).map(|_| rng.random_range(0..3)).collect();
        labels[0] = 2;
        labels[1] = 0;
        let loss_of = |s: &[f32]| {
            let input = QueryInput {
                scores: s,
                previous_scores: None,
                labels: &labels,
                query_labels: &labels,
            };
            objective
                .query_loss(&input, &mut QueryState::new())
                .unwrap()
                .unwrap()
        };
        let q = loss_of(&scores);
        check_gradient(&scores, &q.grad, 1e-3, 2e-3, |s| loss_of(s).loss);
    }
}

/// Checks `analytic` against central differences of `loss` at `scores`, step `h`. The
/// tolerance is relative to the largest gradient component, because the loss is summed
/// from f32 pair terms (relative rounding ~1e-7 of the loss, divided by the step).
pub(crate) fn check_gradient(
    scores: &[f32],
    analytic: &[f64],
    h: f32,
    tol: f64,
    loss: impl Fn(&[f32]) -> f64,
) {
    let scale = analytic.iter().fold(1e-3f64, |m, g| m.max(g.abs()));
    for r in 0..scores.len() {
        let mut plus = scores.to_vec();
        plus[r] += h;
        let mut minus = scores.to_vec();
        minus[r] -= h;
        let step = f64::from(plus[r]) - f64::from(minus[r]);
        let fd = (loss(&plus) - loss(&minus)) / step;
        assert!(
            (fd - analytic[r]).abs() <= tol * scale,
            "row {r}: finite difference {fd} vs analytic {} (scale {scale})",
            analytic[r]
        );
    }
}
