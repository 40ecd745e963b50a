//! Training (SPEC §3.3 Algorithm 1, §3.5): epochs over seeded shuffles of the training
//! queries, batches of queries, one optimiser step per batch, early stopping on validation
//! MAP with the best epoch's parameters kept.
//!
//! Each step: gather the batch's rows into one block, score it with θ_k (and with θ_{k−1}
//! when the objective needs it for μ̂), ask the objective for each query's loss and
//! `∂L_q/∂g`, average over the queries that were not skipped, backpropagate once, step.
//! Everything is sequential and seeded, so a seed determines the model bit for bit.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::objective::{QueryInput, QueryLoss, QueryState};
use super::{
    evaluate_scores, Activation, MetricConvention, ModelMetrics, Net, NormKind, Normalizer,
    Objective, PairCoverage, RankMetrics, RankSet, RerankError, Reranker, TrainingInfo,
    UnifiedMomentum,
};

/// Everything that decides a training run.
#[derive(Debug, Clone)]
pub struct TrainConfig {
    pub objective: Objective,
    /// Hidden layer widths: empty = linear model.
    pub hidden: Vec<usize>,
    pub activation: Activation,
    pub normalization: NormKind,
    pub optimizer: UnifiedMomentum,
    pub epochs: usize,
    /// Queries per batch.
    pub batch_queries: usize,
    /// Stop after this many epochs without a better validation MAP.
    pub patience: usize,
    pub seed: u64,
    pub convention: MetricConvention,
    /// Where the data came from (stored in the model file).
    pub source: String,
    pub parent: Option<String>,
}

/// One line of the per-epoch log (also what the observer sees).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochLog {
    pub epoch: usize,
    /// Mean per-query loss over the epoch's batches.
    pub train_loss: f64,
    /// Validation MAP and NDCG@10 (training set when there is no validation set).
    pub valid_map: f64,
    pub valid_ndcg10: f64,
    pub seconds: f64,
    pub queries_per_s: f64,
    pub pairs_per_s: f64,
    /// Queries the objective skipped (no pair to learn from) in this epoch.
    pub skipped_queries: usize,
    pub best: bool,
}

pub struct TrainOutcome {
    pub model: Reranker,
    pub log: Vec<EpochLog>,
    /// Stopped by the cancel flag (the model is the best one up to then).
    pub cancelled: bool,
    /// Queries a binary objective can use, and those it skips (None for RankNet).
    pub coverage: Option<PairCoverage>,
}

impl TrainConfig {
    fn validate(&self) -> Result<(), RerankError> {
        self.objective.validate()?;
        self.optimizer.validate()?;
        if self.epochs == 0 || self.batch_queries == 0 || self.patience == 0 {
            return Err(RerankError::invalid(format!(
                "epochs, batch size and patience must be at least 1, got {}, {}, {}",
                self.epochs, self.batch_queries, self.patience
            )));
        }
        Ok(())
    }
}

/// A set with its features normalised once, up front.
struct Prepared<'a> {
    set: &'a RankSet,
    x: Vec<f32>,
}

impl<'a> Prepared<'a> {
    fn new(set: &'a RankSet, norm: &Normalizer) -> Self {
        let mut x = Vec::new();
        norm.apply(&set.x, &mut x);
        Prepared { set, x }
    }

    fn metrics(&self, net: &Net, convention: MetricConvention) -> Result<RankMetrics, RerankError> {
        let scores = net.score(&self.x, self.set.num_rows())?;
        evaluate_scores(self.set, &scores, convention)
    }
}

/// Trains a model. `observer` sees every epoch's log line as it finishes; `cancel` is checked
/// between batches (a cancelled run returns the best model so far, or
/// [`RerankError::Cancelled`] if no epoch finished).
pub fn train(
    train_set: &RankSet,
    valid_set: Option<&RankSet>,
    config: &TrainConfig,
    observer: &mut dyn FnMut(&EpochLog),
    cancel: &AtomicBool,
) -> Result<TrainOutcome, RerankError> {
    config.validate()?;
    if train_set.queries.is_empty() {
        return Err(RerankError::invalid("the training set has no queries"));
    }
    if let Some(v) = valid_set {
        if v.feature_names != train_set.feature_names {
            return Err(RerankError::invalid(
                "the validation set's features differ from the training set's",
            ));
        }
    }
    let coverage = config
        .objective
        .threshold()
        .map(|t| train_set.pair_coverage(t));
    if coverage.is_some_and(|c| c.usable == 0) || train_set.graded_pairs() == 0 {
        return Err(RerankError::invalid(format!(
            "no training query has both relevant and non-relevant rows ({coverage:?}): \
             nothing to learn from"
        )));
    }
    let d = train_set.num_features();
    let norm = Normalizer::fit(config.normalization, &train_set.x, d)?;
    let train_data = Prepared::new(train_set, &norm);
    let valid_data = valid_set.map(|v| Prepared::new(v, &norm));
    let select = valid_data.as_ref().unwrap_or(&train_data);

    let mut net = Net::new(d, &config.hidden, config.activation, config.seed)?;
    let decay = net.weight_mask();
    let mut optimizer = config.optimizer.clone();
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let mut mu: Vec<QueryState> = vec![QueryState::new(); train_set.queries.len()];
    let mut previous: Option<Vec<f32>> = None;
    let mut best: Option<(f64, usize, Vec<f32>)> = None;
    let mut since_best = 0;
    let mut log = Vec::new();
    let mut cancelled = false;
    let mut order: Vec<usize> = (0..train_set.queries.len()).collect();

    'epochs: for epoch in 1..=config.epochs {
        let started = Instant::now();
        order.shuffle(&mut rng);
        let (mut loss_sum, mut used, mut skipped, mut pairs) = (0.0, 0usize, 0usize, 0usize);
        for batch in order.chunks(config.batch_queries) {
            if cancel.load(Ordering::Relaxed) {
                cancelled = true;
                break 'epochs;
            }
            let step = batch_step(
                &train_data,
                batch,
                &net,
                previous.as_deref(),
                &config.objective,
                &mut mu,
            )?;
            skipped += batch.len() - step.used;
            if step.used == 0 {
                continue;
            }
            if !step.loss.is_finite() {
                return Err(RerankError::invalid(format!(
                    "training diverged in epoch {epoch} (batch loss {}); lower the learning rate",
                    step.loss
                )));
            }
            loss_sum += step.loss * step.used as f64;
            used += step.used;
            pairs += step.pairs;
            if config.objective.needs_previous_scores() {
                previous = Some(net.params.clone());
            }
            optimizer.step(&mut net.params, &step.grad, &decay);
            if let Some(i) = net.params.iter().position(|p| !p.is_finite()) {
                return Err(RerankError::invalid(format!(
                    "training diverged in epoch {epoch}: parameter {i} became {}; lower the \
                     learning rate",
                    net.params[i]
                )));
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        let metrics = select.metrics(&net, config.convention)?;
        let improved = best.as_ref().is_none_or(|(map, _, _)| metrics.map > *map);
        if improved {
            best = Some((metrics.map, epoch, net.params.clone()));
            since_best = 0;
        } else {
            since_best += 1;
        }
        let line = EpochLog {
            epoch,
            train_loss: if used > 0 {
                loss_sum / used as f64
            } else {
                0.0
            },
            valid_map: metrics.map,
            valid_ndcg10: metrics.ndcg10,
            seconds,
            queries_per_s: used as f64 / seconds.max(1e-9),
            pairs_per_s: pairs as f64 / seconds.max(1e-9),
            skipped_queries: skipped,
            best: improved,
        };
        observer(&line);
        log.push(line);
        if since_best >= config.patience {
            break;
        }
    }
    let Some((_, best_epoch, params)) = best else {
        return Err(RerankError::Cancelled);
    };
    net.params = params;
    let metrics = ModelMetrics {
        train: Some(train_data.metrics(&net, config.convention)?),
        valid: valid_data
            .as_ref()
            .map(|v| v.metrics(&net, config.convention))
            .transpose()?,
    };
    let training = TrainingInfo {
        objective: config.objective.clone(),
        optimizer: config.optimizer.clone(),
        epochs: config.epochs,
        batch_queries: config.batch_queries,
        patience: config.patience,
        seed: config.seed,
        best_epoch,
        epochs_run: log.len(),
        metrics,
        source: config.source.clone(),
    };
    let model = Reranker::new(
        train_set.feature_names.clone(),
        norm,
        net,
        training,
        config.parent.clone(),
    )?;
    Ok(TrainOutcome {
        model,
        log,
        cancelled,
        coverage,
    })
}

/// The result of one batch: mean loss over used queries and its parameter gradient.
pub(crate) struct BatchStep {
    pub loss: f64,
    pub grad: Vec<f64>,
    pub used: usize,
    pub pairs: usize,
}

/// Loss and gradient of one batch of queries (indices into `data`'s queries) at the
/// network's current parameters; `previous` are θ_{k−1} if the objective wants them.
fn batch_step(
    data: &Prepared,
    batch: &[usize],
    net: &Net,
    previous: Option<&[f32]>,
    objective: &Objective,
    mu: &mut [QueryState],
) -> Result<BatchStep, RerankError> {
    let set = data.set;
    let d = set.num_features();
    let mut x = Vec::new();
    let mut labels = Vec::new();
    let mut spans = Vec::with_capacity(batch.len());
    for &qi in batch {
        let rows = &set.queries[qi].rows;
        let start = labels.len();
        x.extend_from_slice(&data.x[rows.start * d..rows.end * d]);
        labels.extend_from_slice(&set.labels[rows.clone()]);
        spans.push((qi, start..labels.len()));
    }
    let n = labels.len();
    let (scores, acts) = net.forward(&x, n)?;
    let previous_scores = match previous {
        Some(params) if objective.needs_previous_scores() => {
            let old = Net {
                params: params.to_vec(),
                ..net.clone()
            };
            Some(old.score(&x, n)?)
        }
        _ => None,
    };
    let mut dscore = vec![0f64; n];
    let (mut loss, mut used, mut pairs) = (0.0, 0, 0);
    for (qi, span) in &spans {
        let input = QueryInput {
            scores: &scores[span.clone()],
            previous_scores: previous_scores.as_ref().map(|p| &p[span.clone()]),
            labels: &labels[span.clone()],
        };
        if let Some(QueryLoss {
            loss: l,
            grad,
            pairs: p,
        }) = objective.query_loss(&input, &mut mu[*qi])?
        {
            loss += l;
            used += 1;
            pairs += p;
            dscore[span.clone()].copy_from_slice(&grad);
        }
    }
    let mut grad = vec![0f64; net.params.len()];
    if used > 0 {
        let scale = 1.0 / used as f64;
        dscore.iter_mut().for_each(|g| *g *= scale);
        net.backward(&x, n, &acts, &dscore, &mut grad);
        loss *= scale;
    }
    Ok(BatchStep {
        loss,
        grad,
        used,
        pairs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rerank::objective::StableAp;
    use crate::rerank::{ObjectiveKind, QueryGroup};
    use rand::Rng;

    /// Random queries whose label depends on the first two features, plus noise features.
    pub(crate) fn synthetic(queries: usize, seed: u64) -> RankSet {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let d = 5;
        let (mut x, mut labels, mut groups) = (Vec::new(), Vec::new(), Vec::new());
        for q in 0..queries {
            let start = labels.len();
            for _ in 0..rng.random_range(4..12) {
                let row: Vec<f32> = (0..d).map(|_| rng.random_range(-1f32..1.0)).collect();
                let signal = row[0] + 0.5 * row[1] + rng.random_range(-0.3f32..0.3);
                labels.push(if signal > 0.7 {
                    2
                } else if signal > 0.1 {
                    1
                } else {
                    0
                });
                x.extend(row.iter().map(|v| v * 3.0 + 10.0));
            }
            groups.push(QueryGroup {
                qid: format!("q{q}"),
                rows: start..labels.len(),
            });
        }
        let names = (0..d).map(|i| format!("f{i}")).collect();
        RankSet::new(names, x, labels, groups, None).unwrap()
    }

    fn config(kind: ObjectiveKind, hidden: Vec<usize>) -> TrainConfig {
        TrainConfig {
            objective: Objective::with_defaults(kind, 0.1, 1),
            hidden,
            activation: Activation::Tanh,
            normalization: NormKind::ZScore,
            optimizer: UnifiedMomentum::paper_defaults(0.05),
            epochs: 8,
            batch_queries: 8,
            patience: 8,
            seed: 42,
            convention: MetricConvention::Letor,
            source: "synthetic".into(),
            parent: None,
        }
    }

    fn objectives() -> Vec<Objective> {
        vec![
            // t = 0: weights constant, so finite differences see exactly what backprop sees.
            Objective::StableAp(StableAp {
                t: 0.0,
                ..StableAp::default()
            }),
            Objective::Ranknet { sigma: 1.0 },
            Objective::SmoothAp {
                tau: 0.1,
                threshold: 1,
                graded: false,
            },
            Objective::StableAp(StableAp {
                t: 0.0,
                graded: true,
                ..StableAp::default()
            }),
            Objective::SmoothAp {
                tau: 0.1,
                threshold: 1,
                graded: true,
            },
            // Piecewise linear in the scores: exact away from the kinks, which random
            // parameters do not hit at this step size.
            Objective::ApHingeQs { threshold: 1 },
            Objective::NdcgHingeQs { threshold: 1 },
        ]
    }

    /// Every objective × model: the batch gradient with respect to the parameters against
    /// central differences of the batch loss, in f32 parameters (step 1e-3; the loss is an f64
    /// mean of f32 pair terms, so the tolerance is 1e-2 of the largest component plus 1e-4).
    #[test]
    fn batch_gradient_matches_finite_differences() {
        let set = synthetic(6, 1);
        let norm = Normalizer::fit(NormKind::ZScore, &set.x, set.num_features()).unwrap();
        let data = Prepared::new(&set, &norm);
        let batch: Vec<usize> = (0..6).collect();
        for objective in objectives() {
            for hidden in [vec![], vec![4], vec![3, 3]] {
                let net = Net::new(5, &hidden, Activation::Tanh, 3).unwrap();
                let mut net = net;
                // Start the linear model away from zero so every term is active.
                for (i, p) in net.params.iter_mut().enumerate() {
                    *p += 0.1 * ((i % 7) as f32 - 3.0) / 3.0;
                }
                let loss_at = |params: &[f32]| {
                    let probe = Net {
                        params: params.to_vec(),
                        ..net.clone()
                    };
                    let mut mu = vec![QueryState::new(); 6];
                    batch_step(&data, &batch, &probe, None, &objective, &mut mu)
                        .unwrap()
                        .loss
                };
                let mut mu = vec![QueryState::new(); 6];
                let step = batch_step(&data, &batch, &net, None, &objective, &mut mu).unwrap();
                let scale = step.grad.iter().fold(0f64, |m, g| m.max(g.abs()));
                for i in 0..net.params.len() {
                    let h = 1e-3f32;
                    let mut plus = net.params.clone();
                    plus[i] += h;
                    let mut minus = net.params.clone();
                    minus[i] -= h;
                    let dx = f64::from(plus[i]) - f64::from(minus[i]);
                    let fd = (loss_at(&plus) - loss_at(&minus)) / dx;
                    assert!(
                        (fd - step.grad[i]).abs() <= 1e-2 * scale + 1e-4,
                        "{:?} {hidden:?} param {i}: fd {fd} vs {}",
                        objective.kind(),
                        step.grad[i]
                    );
                }
            }
        }
    }

    #[test]
    fn learns_and_is_deterministic() {
        let set = synthetic(60, 2);
        let (train_set, valid) = set.split_validation(0.25, 1).unwrap();
        let cancel = AtomicBool::new(false);
        for kind in [
            ObjectiveKind::StableAp,
            ObjectiveKind::Ranknet,
            ObjectiveKind::SmoothAp,
            ObjectiveKind::ApHingeQs,
            ObjectiveKind::NdcgHingeQs,
        ] {
            for hidden in [vec![], vec![8]] {
                let c = config(kind, hidden.clone());
                let mut seen = 0;
                let a = train(&train_set, Some(&valid), &c, &mut |_| seen += 1, &cancel).unwrap();
                assert_eq!(seen, a.log.len());
                let b = train(&train_set, Some(&valid), &c, &mut |_| {}, &cancel).unwrap();
                assert_eq!(a.model.network, b.model.network, "{kind:?} {hidden:?}");
                assert_eq!(a.model.id(), b.model.id());
                // The signal is strong: validation MAP well above a random ranking's.
                let valid_map = a.model.training.metrics.valid.as_ref().unwrap().map;
                assert!(
                    valid_map > 0.8,
                    "{kind:?} {hidden:?}: valid MAP {valid_map}"
                );
            }
        }
    }

    #[test]
    fn cancel_before_first_batch_is_an_error() {
        let set = synthetic(10, 3);
        let cancel = AtomicBool::new(true);
        let c = config(ObjectiveKind::StableAp, vec![]);
        assert!(matches!(
            train(&set, None, &c, &mut |_| {}, &cancel),
            Err(RerankError::Cancelled)
        ));
    }

    /// A cancel raised during training (here by the observer after epoch 2) stops between
    /// batches and returns the best model so far.
    #[test]
    fn cancel_mid_training_keeps_the_best_model() {
        let set = synthetic(30, 5);
        let cancel = AtomicBool::new(false);
        let c = config(ObjectiveKind::Ranknet, vec![]);
        let out = train(
            &set,
            None,
            &c,
            &mut |e| {
                if e.epoch == 2 {
                    cancel.store(true, Ordering::Relaxed);
                }
            },
            &cancel,
        )
        .unwrap();
        assert!(out.cancelled);
        assert_eq!(out.log.len(), 2);
        assert!(out.model.training.best_epoch <= 2);
    }

    #[test]
    fn no_pairs_is_an_error_and_one_sided_queries_are_counted() {
        let mut set = synthetic(10, 4);
        set.labels.iter_mut().for_each(|l| *l = 0);
        let cancel = AtomicBool::new(false);
        let c = config(ObjectiveKind::StableAp, vec![]);
        let err = train(&set, None, &c, &mut |_| {}, &cancel)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("nothing to learn from"), "{err}");
        // One query all positive, one all negative: counted and skipped every epoch.
        let mut set = synthetic(10, 4);
        for r in set.queries[0].rows.clone() {
            set.labels[r] = 2;
        }
        for r in set.queries[1].rows.clone() {
            set.labels[r] = 0;
        }
        let out = train(&set, None, &c, &mut |_| {}, &cancel).unwrap();
        let cov = out.coverage.unwrap();
        assert!(cov.only_positives >= 1 && cov.only_negatives >= 1);
        let skipped = cov.only_positives + cov.only_negatives;
        assert!(out
            .log
            .iter()
            .all(|l| l.skipped_queries == skipped && l.train_loss.is_finite()));
    }
}
