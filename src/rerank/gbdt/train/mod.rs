//! Histogram gradient boosting for ranking (SPEC §3.6): each round asks the objective for
//! every training query's per-row gradients and hessians, grows one tree on them
//! ([`grow`]), adds it with shrinkage, and scores the validation queries for early
//! stopping on validation MAP (SPEC §3.5), keeping the best round's trees.
//!
//! Objectives ([`Objective`]): `LambdaNdcg` and `LambdaAp` (LambdaMART's lambdas and
//! hessians, `objective/lambdarank.rs`), and `StableAp` (SPEC §3.3's loss: its gradient
//! `∂L/∂g` from `objective/stable_ap.rs`, with μ̂_q kept per query across rounds and the
//! previous round's scores for its variance-reduction term; the Newton step's curvature is
//! [`StableApHessian`]). Queries an objective skips get zero gradient and hessian.
//!
//! Row subsampling (`row_fraction`, a fresh Bernoulli sample each round) draws exactly as
//! LightGBM's bagging does ([`Bagging`]), so that with the same `seed` both libraries grow
//! each tree on the same rows; feature subsampling (`feature_fraction`, per tree) draws from
//! a ChaCha8 stream seeded by `seed`. Gradients are computed per query and histograms per feature in
//! parallel (rayon) and always combined in the same order, so a seed determines the model
//! bit for bit on any number of threads.

mod bins;
mod grow;
pub mod unbiased;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rand::seq::index::sample;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

pub use bins::{Binned, FeatureBins};
use grow::grow;
use unbiased::{lists_grad_hess, ClickList, PositionBias};

pub use super::params::GbdtParams;

use super::forest::{Forest, Tree};
use crate::rerank::gbdt::model::GbdtModel;
use crate::rerank::metrics::map_ndcg10;
use crate::rerank::objective::{
    lambda_grad_hess, LambdaMetric, QueryInput, QueryState, StableApHessian,
};
use crate::rerank::{
    evaluate_scores, MetricConvention, ModelMetrics, Objective, RankMetrics, RankSet, RerankError,
    Reranker, TrainConfig, TrainingInfo,
};

/// One boosting round, as the log and the observer see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundLog {
    /// 1-based.
    pub round: usize,
    /// Mean over the training queries of the objective's loss (LambdaMART: 1 − the metric
    /// its lambdas follow; stable AP: its loss) before the round's tree.
    pub train_loss: f64,
    /// Validation MAP and NDCG@10 after the round (training set without validation set).
    pub valid_map: f64,
    pub valid_ndcg10: f64,
    pub leaves: usize,
    pub seconds: f64,
    pub best: bool,
}

/// A trained forest over the training set's features, and how training went.
#[derive(Debug, Clone)]
pub(crate) struct TrainedForest {
    pub forest: Forest,
    /// The kept round (best validation MAP), 1-based.
    pub best_round: usize,
    pub rounds_run: usize,
    pub metrics: ModelMetrics,
    pub log: Vec<RoundLog>,
    pub cancelled: bool,
    /// The position biases learned with unbiased LambdaMART (training groups with logged
    /// lists, [`unbiased`]), after the last round run.
    pub position_bias: Option<PositionBias>,
}

/// A group's unbiased LambdaMART pair costs by rank, of clicks and of non-clicks (the sums
/// the position biases are re-estimated from, [`unbiased`]).
type PairCosts = (Vec<f64>, Vec<f64>);

/// One query's loss, per-row gradients and per-row hessians.
struct QueryNewton {
    loss: f64,
    grad: Vec<f64>,
    hess: Vec<f64>,
}

/// A trained tree reranker and its training log.
pub struct GbdtOutcome {
    pub model: Reranker,
    pub log: Vec<RoundLog>,
    /// Stopped by the cancel flag (the model is the best round up to then).
    pub cancelled: bool,
    /// Unbiased LambdaMART's position biases ([`unbiased`]), when the set had logged lists.
    pub position_bias: Option<PositionBias>,
}

/// Trains a tree reranker ([`train_forest`]) and wraps it as a model file (format version
/// 3) over the training set's features, recording the parameters, rounds and metrics.
pub fn train(
    train: &RankSet,
    valid: Option<&RankSet>,
    config: &TrainConfig,
    on_round: &mut dyn FnMut(&RoundLog),
    cancel: &AtomicBool,
) -> Result<GbdtOutcome, RerankError> {
    let trained = train_forest(train, valid, config, on_round, cancel)?;
    let params = config
        .gbdt
        .as_ref()
        .expect("train_forest checked the tree parameters");
    let training = TrainingInfo {
        objective: config.objective.clone(),
        optimizer: None,
        epochs: params.trees,
        batch_queries: train.queries.len(),
        patience: params.early_stopping_rounds,
        seed: config.seed,
        best_epoch: trained.best_round,
        epochs_run: trained.rounds_run,
        ensemble: 1,
        average_epochs: 1,
        lr_halve_after: 0,
        sample_rows: None,
        mixup: None,
        member_best_epochs: vec![trained.best_round],
        metrics: trained.metrics,
        source: config.source.clone(),
        embedder: None,
    };
    let gbdt = GbdtModel::new(trained.forest, Some(params.clone()), None);
    let model = Reranker::new_gbdt(
        train.feature_names.clone(),
        gbdt,
        training,
        config.parent.clone(),
    )?;
    Ok(GbdtOutcome {
        model,
        log: trained.log,
        cancelled: trained.cancelled,
        position_bias: trained.position_bias,
    })
}

/// The objective's loss, gradient and hessian for one query, or `None` if it is skipped.
fn query_grad_hess(
    objective: &Objective,
    hessian: StableApHessian,
    scores: &[f64],
    previous: Option<&[f64]>,
    labels: &[i32],
    state: &mut QueryState,
) -> Result<Option<QueryNewton>, RerankError> {
    let n = scores.len();
    match objective {
        Objective::LambdaNdcg(p) | Objective::LambdaAp(p) => {
            let metric = if matches!(objective, Objective::LambdaNdcg(_)) {
                LambdaMetric::Ndcg
            } else {
                LambdaMetric::Ap
            };
            let mut g = vec![0.0; n];
            let mut h = vec![0.0; n];
            Ok(
                lambda_grad_hess(scores, labels, metric, p, &mut g, &mut h).map(|v| QueryNewton {
                    loss: 1.0 - v,
                    grad: g,
                    hess: h,
                }),
            )
        }
        Objective::StableAp(p) => {
            let narrow = |s: &[f64]| s.iter().map(|&v| v as f32).collect::<Vec<f32>>();
            let now = narrow(scores);
            let before = previous.map(narrow);
            let input = QueryInput {
                scores: &now,
                previous_scores: before.as_deref(),
                labels,
                query_labels: labels,
            };
            Ok(p.query_newton(&input, state, hessian)?
                .map(|(q, h)| QueryNewton {
                    loss: q.loss,
                    grad: q.grad,
                    hess: h,
                }))
        }
        other => Err(RerankError::invalid(format!(
            "objective {} does not train trees; use lambda-ndcg, lambda-ap or stable-ap",
            other.kind().as_str()
        ))),
    }
}

/// Trains a forest on `train`, early-stopping on `valid` (see the module doc), with
/// `config`'s objective, seed and tree parameters (`gbdt`, which it must have). `on_round`
/// sees every round's log line; `cancel` stops after the current round, keeping the best
/// round so far.
pub(crate) fn train_forest(
    train: &RankSet,
    valid: Option<&RankSet>,
    config: &TrainConfig,
    on_round: &mut dyn FnMut(&RoundLog),
    cancel: &AtomicBool,
) -> Result<TrainedForest, RerankError> {
    let objective = &config.objective;
    let convention = config.convention;
    objective.validate()?;
    let params = config
        .gbdt
        .as_ref()
        .ok_or_else(|| RerankError::invalid("the training configuration has no tree parameters"))?;
    params.validate()?;
    let d = train.num_features();
    let n = train.num_rows();
    if n == 0 || train.queries.is_empty() {
        return Err(RerankError::invalid("the training set has no rows"));
    }
    if let Some(v) = valid {
        if v.feature_names != train.feature_names {
            return Err(RerankError::invalid(
                "the validation set's features differ from the training set's",
            ));
        }
    }
    let binned = Binned::new(&train.x, d, params.max_bins, params.min_data_in_bin);
    let usable: Vec<usize> = (0..d)
        .filter(|&f| !binned.features[f].thresholds.is_empty() || has_missing(&binned, f))
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let mut bagging = Bagging::new(config.seed, n);
    let mut scores = vec![0f64; n];
    let mut previous: Option<Vec<f64>> = None;
    let mut states: Vec<QueryState> = vec![QueryState::new(); train.queries.len()];
    let mut valid_scores = valid.map(|v| vec![0f64; v.num_rows()]);
    let train_columns = columns(&train.x, d);
    let valid_columns = valid.map(|v| columns(&v.x, d));
    let mut trees: Vec<Tree> = Vec::new();
    let mut log = Vec::new();
    let mut best: Option<(usize, f64)> = None;
    let mut cancelled = false;
    // Unbiased LambdaMART on the groups that have logged lists (module `unbiased`).
    let lists: Vec<Option<&[ClickList]>> = train
        .queries
        .iter()
        .map(|q| {
            config
                .click_lists
                .as_ref()
                .and_then(|l| l.by_group.get(&q.qid))
                .map(Vec::as_slice)
        })
        .collect();
    let mut unbiased = match (&config.click_lists, objective) {
        (None, _) => None,
        (Some(l), Objective::LambdaNdcg(p)) => Some((l, p, PositionBias::ones(l.positions()))),
        (Some(_), other) => {
            return Err(RerankError::invalid(format!(
                "unbiased LambdaMART (pairwise debiasing of clicks) trains lambda-ndcg, not {}",
                other.kind().as_str()
            )))
        }
    };
    for round in 1..=params.trees {
        let started = Instant::now();
        // Gradients and hessians, query by query in parallel (each query writes its rows).
        let per_query: Vec<(Option<QueryNewton>, Option<PairCosts>)> = train
            .queries
            .par_iter()
            .zip(states.par_iter_mut())
            .zip(lists.par_iter())
            .map(|((q, state), lists)| {
                let rows = q.rows.clone();
                if let (Some(lists), Some((_, p, bias))) = (lists, &unbiased) {
                    return Ok(match lists_grad_hess(&scores[rows], lists, p, bias) {
                        Some((newton, costs)) => (Some(newton), Some(costs)),
                        None => (None, None),
                    });
                }
                query_grad_hess(
                    objective,
                    params.stable_ap_hessian,
                    &scores[rows.clone()],
                    previous.as_ref().map(|p| &p[rows.clone()]),
                    &train.labels[rows],
                    state,
                )
                .map(|r| (r, None))
            })
            .collect::<Result<_, _>>()?;
        if let Some((l, _, bias)) = unbiased.as_mut() {
            // Summed in query order, so that the biases do not depend on the threads.
            let k = bias.t_plus.len();
            let (mut loss_plus, mut loss_minus) = (vec![0.0; k], vec![0.0; k]);
            for (lp, lm) in per_query.iter().filter_map(|r| r.1.as_ref()) {
                loss_plus.iter_mut().zip(lp).for_each(|(a, b)| *a += b);
                loss_minus.iter_mut().zip(lm).for_each(|(a, b)| *a += b);
            }
            bias.update(&loss_plus, &loss_minus, l.bias_norm);
        }
        let mut grad = vec![0f64; n];
        let mut hess = vec![0f64; n];
        let mut loss_sum = 0.0;
        let mut weight_sum = 0.0;
        let mut used = 0usize;
        for (q, (result, _)) in train.queries.iter().zip(per_query) {
            if let Some(r) = result {
                // A query's weight (SPEC §11, inverse propensity scoring) scales its gradients and hessians, as
                // LightGBM's and XGBoost's query weights do.
                let w = q.weight;
                for (out, g) in grad[q.rows.clone()].iter_mut().zip(&r.grad) {
                    *out = w * g;
                }
                for (out, h) in hess[q.rows.clone()].iter_mut().zip(&r.hess) {
                    *out = w * h;
                }
                loss_sum += w * r.loss;
                weight_sum += w;
                used += 1;
            }
        }
        if used == 0 {
            return Err(RerankError::invalid(
                "no training query has two rows the objective can tell apart",
            ));
        }
        // Bagging and feature sampling.
        let rows: Vec<u32> = if params.row_fraction < 1.0 {
            bagging.draw(params.row_fraction)
        } else {
            (0..n as u32).collect()
        };
        let features: Vec<usize> = if params.feature_fraction < 1.0 && !usable.is_empty() {
            let k = ((usable.len() as f64 * params.feature_fraction).round() as usize).max(1);
            let mut picked: Vec<usize> = sample(&mut rng, usable.len(), k)
                .into_iter()
                .map(|i| usable[i])
                .collect();
            picked.sort_unstable();
            picked
        } else {
            usable.clone()
        };
        let tree = grow(&binned, &grad, &hess, rows, &features, params);
        previous = Some(scores.clone());
        add_tree(&tree, &train_columns, &mut scores);
        if let (Some(vc), Some(vs)) = (&valid_columns, valid_scores.as_mut()) {
            add_tree(&tree, vc, vs);
        }
        let leaves = tree.num_leaves();
        trees.push(tree);
        let (eval_set, eval_scores) = match (valid, &valid_scores) {
            (Some(v), Some(vs)) => (v, vs),
            _ => (train, &scores),
        };
        let (map, ndcg10) = map_ndcg10(eval_set, eval_scores, convention)?;
        let improved = best.is_none_or(|(_, b)| map > b);
        if improved {
            best = Some((round, map));
        }
        let line = RoundLog {
            round,
            train_loss: loss_sum / weight_sum,
            valid_map: map,
            valid_ndcg10: ndcg10,
            leaves,
            seconds: started.elapsed().as_secs_f64(),
            best: improved,
        };
        on_round(&line);
        log.push(line);
        if cancel.load(Ordering::Relaxed) {
            cancelled = true;
            break;
        }
        let best_round = best.map_or(round, |b| b.0);
        if params.early_stopping_rounds > 0
            && valid.is_some()
            && round - best_round >= params.early_stopping_rounds
        {
            break;
        }
    }
    let rounds_run = trees.len();
    let best_round = if params.early_stopping_rounds > 0 && valid.is_some() {
        best.map_or(rounds_run, |b| b.0)
    } else {
        rounds_run
    };
    trees.truncate(best_round);
    let forest = Forest {
        num_features: d,
        base_score: 0.0,
        trees,
    };
    forest.validate().map_err(RerankError::Invalid)?;
    let train_scores = predict_set(&forest, train);
    let metrics = ModelMetrics {
        train: Some(metrics_of(train, &train_scores, convention)?),
        valid: valid
            .map(|v| metrics_of(v, &predict_set(&forest, v), convention))
            .transpose()?,
    };
    Ok(TrainedForest {
        forest,
        best_round,
        rounds_run,
        metrics,
        log,
        cancelled,
        position_bias: unbiased.map(|(_, _, bias)| bias),
    })
}

fn has_missing(binned: &Binned, f: usize) -> bool {
    let missing = binned.features[f].missing() as u8;
    binned.column(f).contains(&missing)
}

/// A row-major `rows × d` matrix in column-major order: a tree reads few features, each
/// for every row, so each round's walk over the training and validation rows reads a few
/// contiguous columns instead of every row's scattered values (a sixth of the training
/// time before). Costs one more copy of the features while training.
fn columns(x: &[f32], d: usize) -> Vec<f32> {
    let rows = x.len().checked_div(d).unwrap_or(0);
    let mut out = vec![0f32; x.len()];
    for (r, row) in x.chunks_exact(d.max(1)).enumerate() {
        for (f, &v) in row.iter().enumerate() {
            out[f * rows + r] = v;
        }
    }
    out
}

/// Adds one tree's output to every row's score, the rows' features column-major
/// ([`columns`]); rows in parallel blocks, each on its own score.
fn add_tree(tree: &Tree, columns: &[f32], scores: &mut [f64]) {
    let rows = scores.len();
    scores
        .par_chunks_mut(1024)
        .enumerate()
        .for_each(|(block, chunk)| {
            for (k, s) in chunk.iter_mut().enumerate() {
                let r = block * 1024 + k;
                *s += tree.predict_by(|f| columns[f * rows + r]);
            }
        });
}

fn predict_set(forest: &Forest, set: &RankSet) -> Vec<f64> {
    let d = set.num_features();
    (0..set.num_rows())
        .into_par_iter()
        .map(|r| forest.predict_row(&set.x[r * d..(r + 1) * d]))
        .collect()
}

fn metrics_of(
    set: &RankSet,
    scores: &[f64],
    convention: MetricConvention,
) -> Result<RankMetrics, RerankError> {
    let narrow: Vec<f32> = scores.iter().map(|&s| s as f32).collect();
    evaluate_scores(set, &narrow, convention)
}

/// LightGBM's random numbers (`include/LightGBM/utils/random.h`): the linear congruential
/// generator `x ← 214013·x + 2531011 (mod 2³²)`, 15 bits per draw. Written here because it
/// is that exact sequence rankd needs, not a good generator (no crate ships it).
struct LightGbmRandom(u32);

impl LightGbmRandom {
    fn next_15_bits(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(214_013).wrapping_add(2_531_011);
        (self.0 >> 16) & 0x7FFF
    }

    /// `NextShort(0, upper)`.
    fn next_short(&mut self, upper: u32) -> u32 {
        self.next_15_bits() % upper
    }

    /// `NextFloat()`: a multiple of 2⁻¹⁵ in [0, 1).
    fn next_float(&mut self) -> f32 {
        self.next_15_bits() as f32 / 32768.0
    }
}

/// LightGBM's bagging (`src/boosting/bagging.hpp`, `BaggingHelper`): row `i` is in the bag
/// when the next draw of generator `⌊i / 1024⌋` is below the fraction; generator `b` starts at
/// `bagging_seed + b`, and `bagging_seed` is the second `NextShort(0, 32767)` of a generator
/// started at `seed` (`Config::Set`). So with the same seed, LightGBM and rankd bag the same
/// rows in every round.
struct Bagging {
    blocks: Vec<LightGbmRandom>,
    rows: usize,
}

impl Bagging {
    const BLOCK: usize = 1024;

    fn new(seed: u64, rows: usize) -> Self {
        let mut derive = LightGbmRandom(seed as u32);
        let _data_random_seed = derive.next_short(i16::MAX as u32);
        let bagging_seed = derive.next_short(i16::MAX as u32);
        Bagging {
            blocks: (0..rows.div_ceil(Self::BLOCK))
                .map(|b| LightGbmRandom(bagging_seed.wrapping_add(b as u32)))
                .collect(),
            rows,
        }
    }

    /// This round's bag, in increasing order.
    fn draw(&mut self, fraction: f64) -> Vec<u32> {
        (0..self.rows)
            .filter(|&i| f64::from(self.blocks[i / Self::BLOCK].next_float()) < fraction)
            .map(|i| i as u32)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rerank::gbdt::forest::Node;
    use crate::rerank::objective::{LambdaParams, StableAp};
    use crate::rerank::testutil::{parity_fixture, rank_train};
    use crate::rerank::QueryGroup;
    use rand::Rng;

    /// Queries of 8..20 rows, 5 features (feature 1 NaN in a tenth of the rows, feature 3
    /// on a grid of 6 values), grades 0..3 from a noisy function of the features.
    pub(crate) fn synthetic(queries: usize, seed: u64) -> RankSet {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let d = 5;
        let (mut x, mut labels, mut groups) = (Vec::new(), Vec::new(), Vec::new());
        for q in 0..queries {
            let start = labels.len();
            for _ in 0..rng.random_range(8..20) {
                let row: Vec<f32> = (0..d)
                    .map(|f| match f {
                        1 if rng.random_bool(0.1) => f32::NAN,
                        3 => f32::from(rng.random_range(0u8..6)) / 5.0,
                        _ => rng.random_range(0.0..1.0),
                    })
                    .collect();
                let signal = 2.0 * row[0] + row[3] + if row[1].is_nan() { 0.5 } else { row[1] }
                    - row[2] * row[4]
                    + rng.random_range(-0.4..0.4);
                labels.push((signal.floor() as i32).clamp(0, 3));
                x.extend(row);
            }
            groups.push(QueryGroup::new(format!("q{q}"), start..labels.len()));
        }
        let names = (1..=d).map(|i| format!("f{i}")).collect();
        // RankSet::new refuses NaN features (the networks cannot read them); trees can.
        RankSet {
            feature_names: names,
            x,
            labels,
            queries: groups,
            doc_ids: None,
        }
    }

    /// LightGBM's own bags: the rows of each round's tree (its root's count in LightGBM's
    /// model dump) for rank.train's 3005 rows, bagging 0.9 every round, seeds 1 and 2
    /// (LightGBM 4.7, lambdarank, `bench/gbdt_letor.py`'s settings, 10 rounds).
    #[test]
    fn bagging_draws_lightgbm_bags() {
        let lightgbm: [(u64, [usize; 10]); 2] = [
            (
                1,
                [2691, 2697, 2738, 2721, 2697, 2679, 2711, 2694, 2686, 2694],
            ),
            (
                2,
                [2727, 2720, 2710, 2695, 2686, 2718, 2711, 2713, 2680, 2716],
            ),
        ];
        for (seed, sizes) in lightgbm {
            let mut bagging = Bagging::new(seed, 3005);
            let ours: Vec<usize> = (0..10).map(|_| bagging.draw(0.9).len()).collect();
            assert_eq!(ours, sizes, "seed {seed}");
        }
    }

    fn ndcg() -> Objective {
        Objective::LambdaNdcg(LambdaParams::default())
    }

    /// A tree run of `objective` with `params` (seed 1).
    fn trees(objective: &Objective, params: &GbdtParams) -> TrainConfig {
        TrainConfig {
            objective: objective.clone(),
            network: Default::default(),
            gbdt: Some(params.clone()),
            seed: 1,
            convention: MetricConvention::Letor,
            source: "synthetic".into(),
            parent: None,
            click_lists: None,
        }
    }

    fn quiet(
        train: &RankSet,
        valid: Option<&RankSet>,
        objective: &Objective,
        params: &GbdtParams,
    ) -> TrainedForest {
        train_forest(
            train,
            valid,
            &trees(objective, params),
            &mut |_| {},
            &AtomicBool::new(false),
        )
        .unwrap()
    }

    /// LightGBM's own trees: LambdaMART-NDCG on the LightGBM LETOR example's rank.train with
    /// train.conf's structure, LightGBM's bins and row estimates (`count_from_hessian`), no
    /// bagging, grows LightGBM 4.7's first trees node for node — same features, thresholds
    /// and rows, leaf values to 1e-4 relative + 1e-6 (LightGBM tabulates the sigmoid and keeps
    /// gradients in f32) —
    /// tests/fixtures/gbdt/lightgbm_trees.json, from bench/gbdt_parity_fixtures.py.
    #[test]
    fn lambda_ndcg_grows_lightgbm_trees() {
        let fixture = parity_fixture("lightgbm_trees.json");
        let expected = fixture["trees"].as_array().unwrap();
        let set = RankSet::from_letor(&rank_train()).unwrap();
        let params = GbdtParams {
            trees: expected.len(),
            leaves: 31,
            min_data_in_leaf: 50,
            count_from_hessian: true,
            min_sum_hessian: 5.0,
            ..GbdtParams::default()
        };
        let forest = quiet(&set, None, &ndcg(), &params).forest;
        assert_eq!(forest.trees.len(), expected.len());
        for (k, (tree, want)) in forest.trees.iter().zip(expected).enumerate() {
            // rankd's nodes in preorder, as LightGBM's dump lists them.
            let mut ours = Vec::new();
            let mut stack = vec![0usize];
            while let Some(i) = stack.pop() {
                match tree.nodes[i] {
                    Node::Split {
                        feature,
                        threshold,
                        left,
                        right,
                        ..
                    } => {
                        // rankd's feature f is file index f + 1, LightGBM's column f + 1.
                        ours.push((Some(feature + 1), f64::from(threshold), tree.cover[i]));
                        stack.push(right as usize);
                        stack.push(left as usize);
                    }
                    Node::Leaf { value } => ours.push((None, value, tree.cover[i])),
                }
            }
            let want = want.as_array().unwrap();
            assert_eq!(ours.len(), want.len(), "tree {k}: node counts");
            for (n, (o, w)) in ours.iter().zip(want).enumerate() {
                let w = w.as_array().unwrap();
                let here = format!("tree {k}, node {n}: rankd {o:?}, LightGBM {w:?}");
                if w.len() == 3 {
                    assert_eq!(o.0, Some(w[0].as_u64().unwrap() as u32), "{here}");
                    // LightGBM's threshold is an f64 just above the midpoint, rankd's the
                    // f32 just below it.
                    assert!((o.1 - w[1].as_f64().unwrap()).abs() < 1e-6, "{here}");
                    assert_eq!(o.2, w[2].as_f64().unwrap(), "{here}");
                } else {
                    assert_eq!(o.0, None, "{here}");
                    let v = w[0].as_f64().unwrap();
                    assert!((o.1 - v).abs() <= 1e-4 * v.abs() + 1e-6, "{here}");
                    assert_eq!(o.2, w[1].as_f64().unwrap(), "{here}");
                }
            }
        }
    }

    /// The root split and leaves of a two-leaf tree against a brute-force scan of every
    /// (feature, value boundary, missing side) with sums taken row by row.
    #[test]
    fn first_split_is_the_brute_force_best() {
        let set = synthetic(30, 3);
        let d = set.num_features();
        let n = set.num_rows();
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        for trial in 0..20 {
            let grad: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
            let hess: Vec<f64> = (0..n).map(|_| rng.random_range(0.01..1.0)).collect();
            let p = GbdtParams {
                leaves: 2,
                max_depth: 0,
                min_data_in_leaf: [1, 5, 40][trial % 3],
                count_from_hessian: false,
                min_sum_hessian: 0.5,
                lambda_l2: [0.0, 1.0][trial % 2],
                min_split_gain: 0.0,
                tree_lr: 0.3,
                ..GbdtParams::default()
            };
            // Few distinct values per feature (rounded to 1/64): every boundary is a bin.
            let x: Vec<f32> = set.x.iter().map(|v| (v * 64.0).round() / 64.0).collect();
            let binned = Binned::new(&x, d, 255, 1);
            let tree = grow(
                &binned,
                &grad,
                &hess,
                (0..n as u32).collect(),
                &(0..d).collect::<Vec<_>>(),
                &p,
            );
            // Brute force.
            let score = |g: f64, h: f64| g * g / (h + p.lambda_l2);
            let (gt, ht): (f64, f64) = (grad.iter().sum(), hess.iter().sum());
            let mut best: Option<(f64, Vec<bool>)> = None;
            for f in 0..d {
                let mut values: Vec<f32> = (0..n)
                    .map(|r| x[r * d + f])
                    .filter(|v| !v.is_nan())
                    .collect();
                values.sort_by(f32::total_cmp);
                values.dedup();
                for &t in &values {
                    for missing_left in [false, true] {
                        let left: Vec<bool> = (0..n)
                            .map(|r| {
                                let v = x[r * d + f];
                                if v.is_nan() {
                                    missing_left
                                } else {
                                    v <= t
                                }
                            })
                            .collect();
                        let (mut gl, mut hl, mut cl) = (0.0, 0.0, 0);
                        for r in 0..n {
                            if left[r] {
                                gl += grad[r];
                                hl += hess[r];
                                cl += 1;
                            }
                        }
                        let (gr, hr, cr) = (gt - gl, ht - hl, n - cl);
                        if cl < p.min_data_in_leaf.max(1)
                            || cr < p.min_data_in_leaf.max(1)
                            || hl < p.min_sum_hessian
                            || hr < p.min_sum_hessian
                        {
                            continue;
                        }
                        let gain = 0.5 * (score(gl, hl) + score(gr, hr) - score(gt, ht));
                        if gain > 1e-9 && best.as_ref().is_none_or(|b| gain > b.0 + 1e-9) {
                            best = Some((gain, left));
                        }
                    }
                }
            }
            let Some((_, want_left)) = best else {
                assert_eq!(tree.nodes.len(), 1, "trial {trial}: no valid split");
                continue;
            };
            let Node::Split { left, .. } = tree.nodes[0] else {
                panic!("trial {trial}: no split, brute force found one");
            };
            // The same partition, and each leaf = −G/(H + λ)·η over its rows.
            let mut sums = [(0.0, 0.0); 2];
            for r in 0..n {
                let goes_left = tree.predict_row(&x[r * d..(r + 1) * d])
                    == match tree.nodes[left as usize] {
                        Node::Leaf { value } => value,
                        _ => unreachable!(),
                    };
                assert_eq!(goes_left, want_left[r], "trial {trial} row {r}");
                let s = &mut sums[usize::from(!goes_left)];
                s.0 += grad[r];
                s.1 += hess[r];
            }
            for (k, (g, h)) in sums.iter().enumerate() {
                let want = -g / (h + p.lambda_l2) * p.tree_lr;
                let Node::Leaf { value } = tree.nodes[1 + k] else {
                    unreachable!()
                };
                assert!((value - want).abs() < 1e-12, "trial {trial} leaf {k}");
            }
        }
    }

    /// With every hessian equal, LightGBM's row estimate is the row count: the same trees.
    #[test]
    fn hessian_row_estimate_is_exact_for_equal_hessians() {
        let set = synthetic(30, 4);
        let d = set.num_features();
        let n = set.num_rows();
        let binned = Binned::new(&set.x, d, 255, 1);
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let grad: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let hess = vec![0.25; n];
        let grown = |count_from_hessian| {
            let p = GbdtParams {
                leaves: 12,
                max_depth: 0,
                min_data_in_leaf: 30,
                count_from_hessian,
                min_sum_hessian: 0.0,
                lambda_l2: 1.0,
                min_split_gain: 0.0,
                tree_lr: 0.1,
                ..GbdtParams::default()
            };
            grow(
                &binned,
                &grad,
                &hess,
                (0..n as u32).collect(),
                &(0..d).collect::<Vec<_>>(),
                &p,
            )
        };
        assert_eq!(grown(true), grown(false));
        assert!(grown(true).num_leaves() > 4);
    }

    #[test]
    fn deterministic_on_any_number_of_threads() {
        let set = synthetic(40, 5);
        let params = GbdtParams {
            trees: 8,
            leaves: 7,
            min_data_in_leaf: 3,
            row_fraction: 0.8,
            feature_fraction: 0.6,
            ..GbdtParams::default()
        };
        let run = |threads: usize, objective: &Objective| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| quiet(&set, None, objective, &params).forest)
        };
        let stable = Objective::StableAp(StableAp {
            graded: true,
            ..StableAp::default()
        });
        for objective in [ndcg(), stable] {
            let one = run(1, &objective);
            assert_eq!(one, run(2, &objective));
            assert_eq!(one, run(3, &objective));
        }
        let other_seed = train_forest(
            &set,
            None,
            &TrainConfig {
                seed: 2,
                ..trees(&ndcg(), &params)
            },
            &mut |_| {},
            &AtomicBool::new(false),
        )
        .unwrap();
        assert_ne!(run(1, &ndcg()), other_seed.forest);
    }

    #[test]
    fn every_objective_learns() {
        let set = synthetic(60, 7);
        let before = metrics_of(&set, &vec![0.0; set.num_rows()], MetricConvention::Letor).unwrap();
        let params = GbdtParams {
            trees: 30,
            leaves: 8,
            min_data_in_leaf: 5,
            ..GbdtParams::default()
        };
        let stable = |hessian| {
            (
                Objective::StableAp(StableAp {
                    graded: true,
                    ..StableAp::default()
                }),
                GbdtParams {
                    stable_ap_hessian: hessian,
                    // A constant hessian of 1 makes much smaller steps than Newton's.
                    tree_lr: if hessian == StableApHessian::Constant {
                        50.0
                    } else {
                        0.1
                    },
                    ..params.clone()
                },
            )
        };
        for (objective, p) in [
            (ndcg(), params.clone()),
            (Objective::LambdaAp(LambdaParams::default()), params.clone()),
            stable(StableApHessian::Bound),
            stable(StableApHessian::Constant),
        ] {
            let out = quiet(&set, None, &objective, &p);
            let after = out.metrics.train.unwrap();
            assert!(
                after.ndcg10 > before.ndcg10 + 0.1 && after.map > before.map + 0.05,
                "{}: NDCG@10 {} → {}, MAP {} → {}",
                objective.kind().as_str(),
                before.ndcg10,
                after.ndcg10,
                before.map,
                after.map
            );
        }
    }

    #[test]
    fn early_stopping_keeps_the_best_round() {
        let train = synthetic(40, 11);
        let valid = synthetic(15, 12);
        let params = GbdtParams {
            trees: 60,
            leaves: 16,
            min_data_in_leaf: 1,
            tree_lr: 0.5,
            early_stopping_rounds: 5,
            ..GbdtParams::default()
        };
        let out = quiet(&train, Some(&valid), &ndcg(), &params);
        let best = out.log.iter().rfind(|l| l.best).unwrap();
        assert_eq!(out.best_round, best.round);
        assert_eq!(out.forest.trees.len(), out.best_round);
        assert!(out.rounds_run == params.trees || out.rounds_run == out.best_round + 5);
        let kept = out.metrics.valid.unwrap().map;
        assert!(
            (kept - best.valid_map).abs() < 1e-12,
            "{kept} vs {}",
            best.valid_map
        );
        let max = out.log.iter().map(|l| l.valid_map).fold(0.0, f64::max);
        assert_eq!(best.valid_map, max);
    }

    #[test]
    fn bad_settings_are_named() {
        let set = synthetic(5, 1);
        let bad = GbdtParams {
            max_bins: 300,
            ..GbdtParams::default()
        };
        let err = train_forest(
            &set,
            None,
            &trees(&ndcg(), &bad),
            &mut |_| {},
            &AtomicBool::new(false),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("max_bins must be in 2..=255, got 300"),
            "{err}"
        );
        let err = train_forest(
            &set,
            None,
            &trees(&Objective::Ranknet { sigma: 1.0 }, &GbdtParams::default()),
            &mut |_| {},
            &AtomicBool::new(false),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("ranknet does not train trees"),
            "{err}"
        );
    }
}
