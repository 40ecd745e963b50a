//! The offline replay of SPEC §5 / seed note 002 §6.5: batch active learning simulated on a
//! fully judged LETOR set, where the "assessor" reveals a stored label.
//!
//! Protocol ([`ReplayConfig`], whose defaults are the note's): k-fold cross-validation by
//! query (per fold: one fold is the test set, one of the others the validation set, the rest
//! the training part; 3/1/1 with five folds). The labelled set starts as the first
//! `initial_queries` training queries (all their rows); every other training row is the
//! unlabelled pool. Each round trains the reranker on the labelled rows
//! (`crate::rerank::train`, early stopping on the validation fold), scores the test fold,
//! then picks `batch` pool rows by the strategy and reveals their labels, `rounds` times.
//!
//! Strategies: random (seeded), plain margin (λ = 1), the angle-diverse batch for each λ
//! of a grid, and the loss-based batch of chapter 4 (`super::loss`, default parameters); the
//! "angle (λ tuned)" line takes, per fold, the λ whose validation MAP averaged
//! over the rounds after the first selection is best — the test fold never chooses anything.

use std::sync::atomic::AtomicBool;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::loss::{labelled_pairs, select_loss_batch, LossParams};
use super::{neighbor_gaps, neighbor_margins, select_batch, unit_rows};
use crate::rerank::{evaluate_scores, MetricConvention, RankSet, RerankError, TrainConfig};

/// What a replay runs (the model each round trains is a [`TrainConfig`] of its own).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ReplayConfig {
    /// The whole replay runs once per seed (folds, initial set, random batches, training).
    pub seeds: Vec<u64>,
    pub folds: usize,
    /// Queries labelled at the start (the first ones of the training part).
    pub initial_queries: usize,
    /// Labels revealed per round.
    pub batch: usize,
    pub rounds: usize,
    /// λ grid of the angle-diverse strategy.
    pub lambdas: Vec<f64>,
}

impl Default for ReplayConfig {
    /// Seed note 002 §6.5's protocol: 5 folds, 5 initial queries, 9 rounds of 50 labels,
    /// three seeds.
    fn default() -> Self {
        ReplayConfig {
            seeds: vec![1, 2, 3],
            folds: 5,
            initial_queries: 5,
            batch: 50,
            rounds: 9,
            lambdas: vec![0.25, 0.5, 0.75, 0.9],
        }
    }
}

/// How a round picks its batch.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "strategy", rename_all = "snake_case")]
pub enum Strategy {
    Random,
    /// The SPEC §5 criterion with this λ (λ = 1: plain margin).
    Angle {
        lambda: f64,
    },
    /// The loss-based batch (seed 002 ch. 4) with its default parameters.
    Loss,
}

impl Strategy {
    pub fn name(&self) -> String {
        match self {
            Strategy::Random => "random".into(),
            Strategy::Angle { lambda } if *lambda == 1.0 => "margin (λ=1)".into(),
            Strategy::Angle { lambda } => format!("angle λ={lambda}"),
            Strategy::Loss => "loss-based (ch. 4)".into(),
        }
    }
}

/// One round of one fold: the model trained on `labels` labelled rows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Round {
    pub labels: usize,
    pub test_map: f64,
    pub test_ndcg10: f64,
    pub valid_map: f64,
}

/// The training part of one fold with its labelled/unlabelled state.
struct Fold<'a> {
    train: &'a RankSet,
    valid: &'a RankSet,
    test: &'a RankSet,
    labelled: Vec<bool>,
}

impl Fold<'_> {
    /// The labelled rows as a training set (queries keep their order; a query with no
    /// labelled row is left out).
    fn labelled_set(&self) -> Result<RankSet, RerankError> {
        let d = self.train.num_features();
        let (mut x, mut labels, mut queries) = (Vec::new(), Vec::new(), Vec::new());
        for q in &self.train.queries {
            let start = labels.len();
            for r in q.rows.clone().filter(|&r| self.labelled[r]) {
                x.extend_from_slice(&self.train.x[r * d..(r + 1) * d]);
                labels.push(self.train.labels[r]);
            }
            if labels.len() > start {
                queries.push(crate::rerank::QueryGroup::new(
                    q.qid.clone(),
                    start..labels.len(),
                ));
            }
        }
        RankSet::new(self.train.feature_names.clone(), x, labels, queries, None)
    }
}

/// Runs one strategy on one fold; returns rounds 0..=`rounds` (round 0: the initial set).
/// `train`'s seed is replaced by `seed`.
fn run_fold(
    fold: &mut Fold,
    strategy: Strategy,
    config: &ReplayConfig,
    train: &TrainConfig,
    seed: u64,
    tick: &dyn Fn(),
) -> Result<Vec<Round>, RerankError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let train_config = TrainConfig {
        seed,
        ..train.clone()
    };
    let d = fold.train.num_features();
    let mut rounds = Vec::with_capacity(config.rounds + 1);
    for round in 0..=config.rounds {
        let labelled = fold.labelled_set()?;
        let never = AtomicBool::new(false);
        let model = crate::rerank::train(
            &labelled,
            Some(fold.valid),
            &train_config,
            &mut |_| {},
            &never,
        )?
        .model;
        let score = |set: &RankSet| model.score(&set.x, set.num_rows());
        let test = evaluate_scores(fold.test, &score(fold.test)?, MetricConvention::Letor)?;
        let valid = evaluate_scores(fold.valid, &score(fold.valid)?, MetricConvention::Letor)?;
        rounds.push(Round {
            labels: labelled.num_rows(),
            test_map: test.map,
            test_ndcg10: test.ndcg10,
            valid_map: valid.map,
        });
        tick();
        if round == config.rounds {
            break;
        }
        let pool: Vec<usize> = (0..fold.train.num_rows())
            .filter(|&r| !fold.labelled[r])
            .collect();
        let picked: Vec<usize> = match strategy {
            Strategy::Random => {
                let mut p = pool.clone();
                p.shuffle(&mut rng);
                p.truncate(config.batch);
                p
            }
            Strategy::Angle { lambda } => {
                let (lists, at) = pool_lists(fold, &pool, &score(fold.train)?);
                let gaps = neighbor_gaps(&lists, &at);
                let mut x = Vec::with_capacity(pool.len() * d);
                for &r in &pool {
                    x.extend_from_slice(&fold.train.x[r * d..(r + 1) * d]);
                }
                let unit = unit_rows(&x, d);
                select_batch(&unit, d, &gaps, config.batch, lambda)
                    .map_err(|e| RerankError::invalid(e.to_string()))?
                    .into_iter()
                    .map(|p| pool[p.item])
                    .collect()
            }
            Strategy::Loss => {
                let (lists, at) = pool_lists(fold, &pool, &score(fold.train)?);
                let margins: Vec<f64> = neighbor_margins(&lists, &at)
                    .into_iter()
                    .map(|m| m.unwrap_or(f64::INFINITY))
                    .collect();
                let mut labelled = Vec::new();
                for (qi, q) in fold.train.queries.iter().enumerate() {
                    let grades: Vec<Option<i32>> = q
                        .rows
                        .clone()
                        .map(|r| fold.labelled[r].then_some(fold.train.labels[r]))
                        .collect();
                    labelled.extend(labelled_pairs(&lists[qi], &grades));
                }
                select_loss_batch(&margins, &labelled, config.batch, &LossParams::default())
                    .map_err(|e| RerankError::invalid(e.to_string()))?
                    .into_iter()
                    .map(|p| pool[p.item])
                    .collect()
            }
        };
        for r in picked {
            fold.labelled[r] = true;
        }
    }
    Ok(rounds)
}

/// Each training query's scores (every row, labelled or not: a neighbour does not need to be
/// unlabelled to make a pair uncertain), and each pool row's (query, position in its list).
fn pool_lists(fold: &Fold, pool: &[usize], scores: &[f32]) -> (Vec<Vec<f32>>, Vec<(usize, usize)>) {
    let lists: Vec<Vec<f32>> = fold
        .train
        .queries
        .iter()
        .map(|q| scores[q.rows.clone()].to_vec())
        .collect();
    let mut query_of = vec![0; fold.train.num_rows()];
    for (qi, q) in fold.train.queries.iter().enumerate() {
        for r in q.rows.clone() {
            query_of[r] = qi;
        }
    }
    let at = pool
        .iter()
        .map(|&r| {
            let qi = query_of[r];
            (qi, r - fold.train.queries[qi].rows.start)
        })
        .collect();
    (lists, at)
}

/// Mean and population standard deviation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct MeanStd {
    pub mean: f64,
    pub std: f64,
}

impl MeanStd {
    pub fn of(values: &[f64]) -> MeanStd {
        let n = values.len().max(1) as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        MeanStd {
            mean,
            std: var.sqrt(),
        }
    }
}

/// One strategy's curve: per round, the labels used and test MAP / NDCG@10 (each seed's
/// mean over the folds, then mean ± std over the seeds).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Curve {
    pub strategy: String,
    pub labels: Vec<f64>,
    pub test_map: Vec<MeanStd>,
    pub test_ndcg10: Vec<MeanStd>,
    /// Per seed, per round: the fold-mean test MAP.
    pub per_seed_map: Vec<Vec<f64>>,
}

/// Everything a replay measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ReplayReport {
    pub seeds: Vec<u64>,
    pub folds: usize,
    pub initial_queries: usize,
    pub batch: usize,
    pub rounds: usize,
    pub lambdas: Vec<f64>,
    /// random, margin (λ=1), each λ of the grid, loss-based, then "angle (λ tuned)".
    pub curves: Vec<Curve>,
    /// The λ the validation folds chose, per seed and fold.
    pub tuned_lambdas: Vec<Vec<f64>>,
}

/// The number of trainings a replay runs (for a progress bar).
pub(crate) fn trainings(config: &ReplayConfig) -> u64 {
    ((3 + config.lambdas.len()) * config.folds * (config.rounds + 1) * config.seeds.len()) as u64
}

/// Runs the replay over `all` (every judged query) for each seed, training `train_config`
/// each round; `tick` is called after each training.
pub(crate) fn replay(
    all: &RankSet,
    config: &ReplayConfig,
    train_config: &TrainConfig,
    tick: &dyn Fn(),
) -> Result<ReplayReport, RerankError> {
    let seeds = &config.seeds;
    if seeds.is_empty() {
        return Err(RerankError::invalid("give at least one seed"));
    }
    if config.lambdas.iter().any(|l| !(0.0..=1.0).contains(l)) {
        return Err(RerankError::invalid("every λ must be in [0, 1]"));
    }
    let mut strategies = vec![Strategy::Random, Strategy::Angle { lambda: 1.0 }];
    strategies.extend(
        config
            .lambdas
            .iter()
            .map(|&lambda| Strategy::Angle { lambda }),
    );
    strategies.push(Strategy::Loss);
    let rounds = config.rounds + 1;
    // [strategy][seed][round] fold means, and the tuned line.
    let mut map = vec![vec![vec![0.0; rounds]; seeds.len()]; strategies.len() + 1];
    let mut ndcg = map.clone();
    let mut labels = vec![vec![0.0; rounds]; strategies.len() + 1];
    let mut tuned_lambdas = Vec::new();
    for (si, &seed) in seeds.iter().enumerate() {
        let folds = all.k_folds(config.folds, seed)?;
        let mut chosen = Vec::new();
        for (fi, (rest, test)) in folds.iter().enumerate() {
            let (train, valid) = rest.split_validation(1.0 / (config.folds - 1) as f64, seed)?;
            let initial: Vec<bool> = {
                let mut l = vec![false; train.num_rows()];
                for q in train.queries.iter().take(config.initial_queries) {
                    l[q.rows.clone()].iter_mut().for_each(|v| *v = true);
                }
                l
            };
            let mut best: Option<(f64, usize)> = None;
            let mut results = Vec::new();
            for (ti, &strategy) in strategies.iter().enumerate() {
                let mut fold = Fold {
                    train: &train,
                    valid: &valid,
                    test,
                    labelled: initial.clone(),
                };
                let fold_seed = seed.wrapping_mul(1_000_003).wrapping_add(fi as u64);
                let r = run_fold(&mut fold, strategy, config, train_config, fold_seed, tick)?;
                if matches!(strategy, Strategy::Angle { lambda } if lambda < 1.0) {
                    let v = r[1..].iter().map(|x| x.valid_map).sum::<f64>();
                    if best.is_none_or(|(b, _)| v > b) {
                        best = Some((v, ti));
                    }
                }
                results.push(r);
            }
            if let Some((_, ti)) = best {
                let r = results[ti].clone();
                results.push(r);
                if let Strategy::Angle { lambda } = strategies[ti] {
                    chosen.push(lambda);
                }
            }
            for (ti, r) in results.iter().enumerate() {
                for (round, x) in r.iter().enumerate() {
                    let n = config.folds as f64;
                    map[ti][si][round] += x.test_map / n;
                    ndcg[ti][si][round] += x.test_ndcg10 / n;
                    labels[ti][round] += x.labels as f64 / (n * seeds.len() as f64);
                }
            }
        }
        tuned_lambdas.push(chosen);
    }
    let mut names: Vec<String> = strategies.iter().map(Strategy::name).collect();
    names.push("angle (λ tuned on validation)".into());
    let curves = names
        .into_iter()
        .enumerate()
        .filter(|(ti, _)| *ti < strategies.len() || !config.lambdas.is_empty())
        .map(|(ti, strategy)| {
            let column = |m: &Vec<Vec<Vec<f64>>>, round: usize| {
                MeanStd::of(&m[ti].iter().map(|s| s[round]).collect::<Vec<_>>())
            };
            Curve {
                strategy,
                labels: labels[ti].clone(),
                test_map: (0..rounds).map(|r| column(&map, r)).collect(),
                test_ndcg10: (0..rounds).map(|r| column(&ndcg, r)).collect(),
                per_seed_map: map[ti].clone(),
            }
        })
        .collect();
    Ok(ReplayReport {
        seeds: seeds.clone(),
        folds: config.folds,
        initial_queries: config.initial_queries,
        batch: config.batch,
        rounds: config.rounds,
        lambdas: config.lambdas.clone(),
        curves,
        tuned_lambdas,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rerank::QueryGroup;
    use crate::training::{ModelChoice, TrainSettings};
    use rand::Rng;

    /// 30 queries of 12 rows; feature 0 carries the label, feature 1 is noise.
    fn synthetic() -> RankSet {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let (mut x, mut labels, mut queries) = (Vec::new(), Vec::new(), Vec::new());
        for q in 0..30 {
            let start = labels.len();
            for _ in 0..12 {
                let label = rng.random_range(0..3);
                x.push(label as f32 + rng.random_range(-0.8f32..0.8));
                x.push(rng.random_range(-1.0f32..1.0));
                labels.push(label);
            }
            queries.push(QueryGroup::new(format!("q{q}"), start..labels.len()));
        }
        RankSet::new(vec!["f1".into(), "f2".into()], x, labels, queries, None).unwrap()
    }

    #[test]
    fn replay_adds_a_batch_per_round_and_reports_every_strategy() {
        let mut learn = TrainSettings {
            model: ModelChoice::Linear,
            ..TrainSettings::letor_network()
        };
        learn.network.epochs = 5;
        let config = ReplayConfig {
            seeds: vec![1],
            folds: 5,
            initial_queries: 2,
            batch: 7,
            rounds: 2,
            lambdas: vec![0.5],
        };
        let train = learn.config("synthetic".into(), crate::rerank::MetricConvention::Letor);
        let ticks = std::sync::atomic::AtomicUsize::new(0);
        let report = replay(&synthetic(), &config, &train, &|| {
            ticks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })
        .unwrap();
        assert_eq!(
            ticks.into_inner() as u64,
            trainings(&config),
            "one tick per training"
        );
        let names: Vec<&str> = report.curves.iter().map(|c| c.strategy.as_str()).collect();
        assert_eq!(
            names,
            [
                "random",
                "margin (λ=1)",
                "angle λ=0.5",
                "loss-based (ch. 4)",
                "angle (λ tuned on validation)"
            ]
        );
        for c in &report.curves {
            // 2 initial queries of 12 rows, then 7 more per round.
            let labels: Vec<f64> = c.labels.iter().map(|l| l.round()).collect();
            assert_eq!(labels, [24.0, 31.0, 38.0], "{}", c.strategy);
            assert!(c.test_map.iter().all(|m| m.mean > 0.0 && m.mean <= 1.0));
        }
        assert_eq!(report.tuned_lambdas, [vec![0.5; 5]]);
    }
}
