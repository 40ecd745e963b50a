//! Training (SPEC §3.3 Algorithm 1, §3.5): epochs over seeded shuffles of the training
//! queries, batches of queries, one optimiser step per batch, early stopping on validation
//! MAP with the best epoch's parameters kept.
//!
//! Each step: gather the batch's rows into one block, score it with θ_k (and with θ_{k−1}
//! when the objective needs it for μ̂), ask the objective for each query's loss and
//! `∂L_q/∂g`, average over the queries that were not skipped, backpropagate once, step.
//! Everything is sequential and seeded, so a seed determines the model bit for bit.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use aligned_vec::AVec;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::gbdt::train::RoundLog;
use super::net::{ensemble_score, mean_params};
use super::objective::{QueryInput, QueryLoss, QueryState};
use super::{
    evaluate_scores, MetricConvention, ModelMetrics, Net, Normalizer, Objective, PairCoverage,
    RankMetrics, RankSet, RerankError, Reranker, TrainConfig, TrainingInfo,
};

/// One line of the per-epoch log (also what the observer sees).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochLog {
    /// The ensemble member being trained (0 without an ensemble).
    #[serde(default)]
    pub member: usize,
    pub epoch: usize,
    /// Mean per-query loss over the epoch's batches.
    pub train_loss: f64,
    /// Validation MAP and NDCG@10 (training set when there is no validation set).
    pub valid_map: f64,
    pub valid_ndcg10: f64,
    pub seconds: f64,
    /// The learning rate the epoch ran with.
    #[serde(default)]
    pub lr: f64,
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
    /// Trees trained by unbiased LambdaMART: the learned position biases.
    pub position_bias: Option<super::gbdt::train::unbiased::PositionBias>,
}

/// A set with its features normalised once, up front.
struct Prepared<'a> {
    set: &'a RankSet,
    x: AVec<f32>,
}

impl<'a> Prepared<'a> {
    fn new(set: &'a RankSet, norm: &Normalizer) -> Self {
        Prepared {
            set,
            x: norm.apply(&set.x),
        }
    }

    /// Metrics of one network or of an ensemble (mean score).
    fn metrics(
        &self,
        networks: &[Net],
        convention: MetricConvention,
    ) -> Result<RankMetrics, RerankError> {
        let scores = ensemble_score(networks, &self.x, self.set.num_rows())?;
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
    config.objective.validate()?;
    if config.gbdt.is_none() {
        // The tree trainer checks its own parameters.
        config.network.validate()?;
    }
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
    // Groups with logged click lists (unbiased LambdaMART) learn from the lists, not from
    // their labels ("ever clicked", all 1 once every shown row drew a click): the tree
    // trainer refuses a set whose lists have no (clicked, unclicked) pair.
    let labels_train = config.click_lists.is_none();
    if labels_train && (coverage.is_some_and(|c| c.usable == 0) || train_set.graded_pairs() == 0) {
        return Err(RerankError::invalid(format!(
            "no training query has both relevant and non-relevant rows ({coverage:?}): \
             nothing to learn from"
        )));
    }
    if config.gbdt.is_some() {
        return train_trees(train_set, valid_set, config, coverage, observer, cancel);
    }
    let d = train_set.num_features();
    let norm = Normalizer::fit(config.network.norm, &train_set.x, d)?;
    let train_data = Prepared::new(train_set, &norm);
    let valid_data = valid_set.map(|v| Prepared::new(v, &norm));
    let select = valid_data.as_ref().unwrap_or(&train_data);
    let mut log = Vec::new();
    let mut members: Vec<(Net, usize)> = Vec::with_capacity(config.network.ensemble);
    let mut cancelled = false;
    for member in 0..config.network.ensemble {
        let run = train_member(
            &train_data,
            select,
            config,
            member,
            &mut |line| {
                observer(line);
                log.push(line.clone());
            },
            cancel,
        )?;
        cancelled = run.cancelled;
        if let Some(kept) = run.kept {
            members.push(kept);
        }
        if cancelled {
            break;
        }
    }
    if members.is_empty() {
        return Err(RerankError::Cancelled);
    }
    let best_epoch = members[0].1;
    let epochs_run = log.iter().filter(|l| l.member == 0).count();
    let member_best_epochs = members.iter().map(|(_, e)| *e).collect();
    let networks = if config.network.hidden.is_empty() {
        // Linear members fold into one linear model with the mean weights.
        let mut net = members[0].0.clone();
        net.params = mean_params(members.iter().map(|(n, _)| n.params.as_slice()));
        vec![net]
    } else {
        members.into_iter().map(|(n, _)| n).collect()
    };
    let metrics = ModelMetrics {
        train: Some(train_data.metrics(&networks, config.convention)?),
        valid: valid_data
            .as_ref()
            .map(|v| v.metrics(&networks, config.convention))
            .transpose()?,
    };
    let training = TrainingInfo {
        objective: config.objective.clone(),
        optimizer: Some(config.network.optimizer()),
        epochs: config.network.epochs,
        batch_queries: config.network.batch,
        patience: config.network.patience,
        seed: config.seed,
        best_epoch,
        epochs_run,
        ensemble: config.network.ensemble,
        average_epochs: config.network.average_epochs,
        lr_halve_after: config.network.lr_halve_after,
        sample_rows: config.network.sample_rows,
        mixup: config.network.mixup,
        member_best_epochs,
        metrics,
        source: config.source.clone(),
        embedder: None,
    };
    let model = Reranker::new(
        train_set.feature_names.clone(),
        norm,
        networks,
        training,
        config.parent.clone(),
    )?;
    Ok(TrainOutcome {
        model,
        log,
        cancelled,
        coverage,
        position_bias: None,
    })
}

/// [`train`] with trees: each boosting round is one log line (an "epoch").
fn train_trees(
    train_set: &RankSet,
    valid_set: Option<&RankSet>,
    config: &TrainConfig,
    coverage: Option<PairCoverage>,
    observer: &mut dyn FnMut(&EpochLog),
    cancel: &AtomicBool,
) -> Result<TrainOutcome, RerankError> {
    let queries = train_set.queries.len() as f64;
    let lr = config.gbdt.as_ref().map_or(0.0, |p| p.tree_lr);
    let mut log = Vec::new();
    let outcome = super::gbdt::train::train(
        train_set,
        valid_set,
        config,
        &mut |r: &RoundLog| {
            let line = EpochLog {
                member: 0,
                epoch: r.round,
                train_loss: r.train_loss,
                valid_map: r.valid_map,
                valid_ndcg10: r.valid_ndcg10,
                seconds: r.seconds,
                lr,
                queries_per_s: queries / r.seconds.max(1e-9),
                pairs_per_s: 0.0,
                skipped_queries: 0,
                best: r.best,
            };
            observer(&line);
            log.push(line);
        },
        cancel,
    )?;
    Ok(TrainOutcome {
        model: outcome.model,
        log,
        cancelled: outcome.cancelled,
        coverage,
        position_bias: outcome.position_bias,
    })
}

/// The seed of ensemble member `k`: the run's seed for the first member (so an ensemble of
/// one is the plain run), distinct seeds for the others.
fn member_seed(seed: u64, k: usize) -> u64 {
    seed.wrapping_add((k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// What one member's run kept: its network at the best epoch and that epoch (None when
/// cancelled before the first epoch ended).
struct MemberRun {
    kept: Option<(Net, usize)>,
    cancelled: bool,
}

/// Trains one network (initialisation and query shuffles from [`member_seed`]) with early
/// stopping on `select`'s MAP. With `average_epochs` = N > 1 the network evaluated and kept
/// at each epoch is the mean of the parameters at the end of the last N epochs (tail
/// averaging; the optimiser keeps walking from the raw parameters).
fn train_member(
    train_data: &Prepared,
    select: &Prepared,
    config: &TrainConfig,
    member: usize,
    observer: &mut dyn FnMut(&EpochLog),
    cancel: &AtomicBool,
) -> Result<MemberRun, RerankError> {
    let seed = member_seed(config.seed, member);
    let d = train_data.set.num_features();
    let mut net = Net::new(d, &config.network.hidden, config.network.activation, seed)?;
    let decay = net.weight_mask();
    let mut optimizer = config.network.optimizer();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut state: Vec<QueryState> = vec![QueryState::new(); train_data.set.queries.len()];
    let mut previous: Option<Vec<f32>> = None;
    let mut recent: VecDeque<Vec<f32>> = VecDeque::with_capacity(config.network.average_epochs);
    let mut best: Option<(f64, usize, Net)> = None;
    let mut since_best = 0;
    let mut cancelled = false;
    let mut order: Vec<usize> = (0..train_data.set.queries.len()).collect();

    'epochs: for epoch in 1..=config.network.epochs {
        let started = Instant::now();
        let lr = optimizer.lr;
        order.shuffle(&mut rng);
        let (mut loss_sum, mut used, mut skipped, mut pairs) = (0.0, 0usize, 0usize, 0usize);
        for batch in order.chunks(config.network.batch) {
            if cancel.load(Ordering::Relaxed) {
                cancelled = true;
                break 'epochs;
            }
            let mut rows = Rows {
                sample: config.network.sample_rows,
                mixup: config.network.mixup,
                rng: &mut rng,
            };
            let step = batch_step(
                train_data,
                batch,
                &net,
                previous.as_deref(),
                &config.objective,
                &mut state,
                &mut rows,
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
        if recent.len() == config.network.average_epochs {
            recent.pop_front();
        }
        recent.push_back(net.params.clone());
        let candidate = Net {
            params: mean_params(recent.iter().map(Vec::as_slice)),
            ..net.clone()
        };
        let metrics = select.metrics(std::slice::from_ref(&candidate), config.convention)?;
        let improved = best.as_ref().is_none_or(|(map, _, _)| metrics.map > *map);
        if improved {
            best = Some((metrics.map, epoch, candidate));
            since_best = 0;
        } else {
            since_best += 1;
            if config.network.lr_halve_after > 0 && since_best % config.network.lr_halve_after == 0
            {
                optimizer.lr *= 0.5;
            }
        }
        observer(&EpochLog {
            member,
            epoch,
            train_loss: if used > 0 {
                loss_sum / used as f64
            } else {
                0.0
            },
            valid_map: metrics.map,
            valid_ndcg10: metrics.ndcg10,
            seconds,
            lr,
            queries_per_s: used as f64 / seconds.max(1e-9),
            pairs_per_s: pairs as f64 / seconds.max(1e-9),
            skipped_queries: skipped,
            best: improved,
        });
        if since_best >= config.network.patience {
            break;
        }
    }
    Ok(MemberRun {
        kept: best.map(|(_, epoch, net)| (net, epoch)),
        cancelled,
    })
}

/// The result of one batch: mean loss over used queries and its parameter gradient.
pub(crate) struct BatchStep {
    pub loss: f64,
    pub grad: Vec<f64>,
    pub used: usize,
    pub pairs: usize,
}

/// Which rows of a query a training step sees ([`NetworkParams::sample_rows`],
/// [`NetworkParams::mixup`]); the generator is the member's, so without either option it is
/// never drawn from and a run is unchanged.
pub(crate) struct Rows<'a> {
    pub sample: Option<usize>,
    pub mixup: Option<f32>,
    pub rng: &'a mut ChaCha8Rng,
}

impl<'a> Rows<'a> {
    /// Every row, nothing added.
    #[cfg(test)]
    pub fn all(rng: &'a mut ChaCha8Rng) -> Rows<'a> {
        Rows {
            sample: None,
            mixup: None,
            rng,
        }
    }

    /// Appends one query's rows to the batch block: all of them, or a uniform sample of
    /// `sample` (kept in file order); then the mixup rows.
    fn gather(
        &mut self,
        data: &Prepared,
        query: std::ops::Range<usize>,
        x: &mut Vec<f32>,
        labels: &mut Vec<i32>,
    ) {
        let d = data.set.num_features();
        let picked: Vec<usize> = match self.sample {
            Some(n) if query.len() > n => {
                let mut picked = rand::seq::index::sample(self.rng, query.len(), n).into_vec();
                picked.sort_unstable();
                picked.into_iter().map(|i| query.start + i).collect()
            }
            _ => query.collect(),
        };
        for &r in &picked {
            x.extend_from_slice(&data.x[r * d..(r + 1) * d]);
            labels.push(data.set.labels[r]);
        }
        let Some(u) = self.mixup else { return };
        let mut by_grade: std::collections::BTreeMap<i32, Vec<usize>> = Default::default();
        for &r in &picked {
            by_grade.entry(data.set.labels[r]).or_default().push(r);
        }
        for (grade, members) in by_grade.into_iter().filter(|(_, m)| m.len() >= 2) {
            for &i in &members {
                let w: Vec<f32> = members.iter().map(|_| self.rng.random::<f32>()).collect();
                let total: f32 = w.iter().sum::<f32>().max(f32::MIN_POSITIVE);
                // The new row is built in place at the end of the batch block.
                let start = x.len();
                x.extend(data.x[i * d..(i + 1) * d].iter().map(|v| u * v));
                for (&j, wj) in members.iter().zip(&w) {
                    let c = (1.0 - u) * wj / total;
                    for (out, v) in x[start..].iter_mut().zip(&data.x[j * d..(j + 1) * d]) {
                        *out += c * v;
                    }
                }
                labels.push(grade);
            }
        }
    }
}

/// Loss and gradient of one batch of queries (indices into `data`'s queries) at the
/// network's current parameters; `previous` are θ_{k−1} if the objective wants them; `rows`
/// decides which rows of each query the step sees.
fn batch_step(
    data: &Prepared,
    batch: &[usize],
    net: &Net,
    previous: Option<&[f32]>,
    objective: &Objective,
    state: &mut [QueryState],
    rows: &mut Rows,
) -> Result<BatchStep, RerankError> {
    let set = data.set;
    let mut x = Vec::new();
    let mut labels = Vec::new();
    let mut spans = Vec::with_capacity(batch.len());
    for &qi in batch {
        let start = labels.len();
        rows.gather(data, set.queries[qi].rows.clone(), &mut x, &mut labels);
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
    let (mut loss, mut used, mut pairs, mut weight) = (0.0, 0, 0, 0.0);
    for (qi, span) in &spans {
        let input = QueryInput {
            scores: &scores[span.clone()],
            previous_scores: previous_scores.as_ref().map(|p| &p[span.clone()]),
            labels: &labels[span.clone()],
            query_labels: &set.labels[set.queries[*qi].rows.clone()],
        };
        if let Some(QueryLoss {
            loss: l,
            grad,
            pairs: p,
        }) = objective.query_loss(&input, &mut state[*qi])?
        {
            // A weighted query (SPEC §11, inverse propensity scoring) counts `w` times in the batch's mean.
            let w = set.queries[*qi].weight;
            loss += w * l;
            used += 1;
            weight += w;
            pairs += p;
            for (d, g) in dscore[span.clone()].iter_mut().zip(&grad) {
                *d = w * g;
            }
        }
    }
    let mut grad = vec![0f64; net.params.len()];
    if used > 0 {
        let scale = 1.0 / weight;
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
    use crate::rerank::{Activation, NetworkParams, NormKind, ObjectiveKind, QueryGroup};
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
            groups.push(QueryGroup::new(format!("q{q}"), start..labels.len()));
        }
        let names = (0..d).map(|i| format!("f{i}")).collect();
        RankSet::new(names, x, labels, groups, None).unwrap()
    }

    fn config(kind: ObjectiveKind, hidden: Vec<usize>) -> TrainConfig {
        TrainConfig {
            objective: Objective::with_defaults(kind, 0.1, 1),
            network: NetworkParams {
                hidden,
                activation: Activation::Tanh,
                norm: NormKind::ZScore,
                lr: 0.05,
                epochs: 8,
                batch: 8,
                patience: 8,
                ..NetworkParams::default()
            },
            gbdt: None,
            seed: 42,
            convention: MetricConvention::Letor,
            source: "synthetic".into(),
            parent: None,
            click_lists: None,
        }
    }

    /// `config` with its network changed by `change`.
    fn with(mut config: TrainConfig, change: impl FnOnce(&mut NetworkParams)) -> TrainConfig {
        change(&mut config.network);
        config
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
            // τ₂ = 10⁶ makes the stop-gradient TPR constant to ~10⁻⁷ (soprc.rs tests), so
            // finite differences see what backprop sees; graded, so every level is covered.
            Objective::Soprc(crate::rerank::objective::Soprc {
                tau2: 1e6,
                graded: true,
                ..Default::default()
            }),
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
                    let mut state = vec![QueryState::new(); 6];
                    let mut rng = ChaCha8Rng::seed_from_u64(0);
                    batch_step(
                        &data,
                        &batch,
                        &probe,
                        None,
                        &objective,
                        &mut state,
                        &mut Rows::all(&mut rng),
                    )
                    .unwrap()
                    .loss
                };
                let mut state = vec![QueryState::new(); 6];
                let mut rng = ChaCha8Rng::seed_from_u64(0);
                let step = batch_step(
                    &data,
                    &batch,
                    &net,
                    None,
                    &objective,
                    &mut state,
                    &mut Rows::all(&mut rng),
                )
                .unwrap();
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
            ObjectiveKind::Soprc,
        ] {
            for hidden in [vec![], vec![8]] {
                let c = config(kind, hidden.clone());
                let mut seen = 0;
                let a = train(&train_set, Some(&valid), &c, &mut |_| seen += 1, &cancel).unwrap();
                assert_eq!(seen, a.log.len());
                let b = train(&train_set, Some(&valid), &c, &mut |_| {}, &cancel).unwrap();
                assert_eq!(a.model.networks, b.model.networks, "{kind:?} {hidden:?}");
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

    /// A query of weight 2 is the same query twice: equal batch loss and gradient.
    #[test]
    fn a_weight_of_two_is_a_query_counted_twice() {
        let set = synthetic(4, 3);
        let mut weighted = set.clone();
        weighted.queries[1].weight = 2.0;
        let twice = set.subset(&[0, 1, 1, 2, 3]);
        let norm = Normalizer::fit(NormKind::ZScore, &set.x, set.num_features()).unwrap();
        let mut net = Net::new(5, &[], Activation::Tanh, 3).unwrap();
        // Away from the zero start, where every pair's loss is ln 2.
        for (i, p) in net.params.iter_mut().enumerate() {
            *p = 0.3 * (i as f32 + 1.0).sin();
        }
        let step = |set: &RankSet| {
            let data = Prepared::new(set, &norm);
            let mut rng = ChaCha8Rng::seed_from_u64(1);
            let mut rows = Rows::all(&mut rng);
            let mut state = vec![QueryState::new(); set.queries.len()];
            let batch: Vec<usize> = (0..set.queries.len()).collect();
            let objective = Objective::Ranknet { sigma: 1.0 };
            batch_step(&data, &batch, &net, None, &objective, &mut state, &mut rows).unwrap()
        };
        let (a, b) = (step(&weighted), step(&twice));
        assert!((a.loss - b.loss).abs() < 1e-12, "{} vs {}", a.loss, b.loss);
        for (x, y) in a.grad.iter().zip(&b.grad) {
            assert!((x - y).abs() < 1e-12, "{x} vs {y}");
        }
        // And weight 1 everywhere is the unweighted mean it always was.
        assert_ne!(step(&set).loss, a.loss);
    }

    /// `sample_rows`: deterministic, still learns, and every query's batch block holds at most
    /// n rows drawn from its own rows.
    #[test]
    fn sampled_rows_train_deterministically() {
        let set = synthetic(60, 2);
        let (train_set, valid) = set.split_validation(0.25, 1).unwrap();
        let cancel = AtomicBool::new(false);
        for kind in [ObjectiveKind::StableAp, ObjectiveKind::Soprc] {
            let c = with(config(kind, vec![8]), |n| n.sample_rows = Some(5));
            let a = train(&train_set, Some(&valid), &c, &mut |_| {}, &cancel).unwrap();
            let b = train(&train_set, Some(&valid), &c, &mut |_| {}, &cancel).unwrap();
            assert_eq!(a.model.networks, b.model.networks);
            assert_eq!(a.model.training.sample_rows, Some(5));
            let full = train(
                &train_set,
                Some(&valid),
                &config(kind, vec![8]),
                &mut |_| {},
                &cancel,
            )
            .unwrap();
            assert_ne!(
                a.model.networks, full.model.networks,
                "{kind:?}: sampling is used"
            );
            let valid_map = a.model.training.metrics.valid.as_ref().unwrap().map;
            assert!(valid_map > 0.8, "{kind:?}: valid MAP {valid_map}");
        }
        let norm = Normalizer::fit(NormKind::ZScore, &set.x, set.num_features()).unwrap();
        let data = Prepared::new(&set, &norm);
        let net = Net::new(5, &[], Activation::Tanh, 3).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let batch: Vec<usize> = (0..set.queries.len()).collect();
        let objective = Objective::Ranknet { sigma: 1.0 };
        let mut step = |sample: Option<usize>, mixup: Option<f32>| {
            let mut rows = Rows {
                sample,
                mixup,
                rng: &mut rng,
            };
            let mut state = vec![QueryState::new(); set.queries.len()];
            batch_step(&data, &batch, &net, None, &objective, &mut state, &mut rows).unwrap()
        };
        let all = step(None, None);
        let sampled = step(Some(3), None);
        // RankNet counts each pair of different grades once: 3 rows give at most 3 pairs,
        // fewer than the full lists (4–11 rows) give.
        assert!(sampled.pairs <= 3 * set.queries.len() && sampled.pairs < all.pairs);
        // Mixup adds a row per row of a grade that has two or more rows in the query, each
        // with that grade, so every pair count grows.
        let mixed = step(None, Some(0.9));
        assert!(mixed.pairs > all.pairs);
    }

    /// Mixup rows by hand: two rows of grade 1 and one of grade 0; u = 1 copies the grade's
    /// rows, u = 0 gives convex combinations of them (inside their bounding box, same grade).
    #[test]
    fn mixup_rows_are_convex_combinations_within_a_grade() {
        let names = vec!["a".to_string(), "b".to_string()];
        let x = vec![1.0, 0.0, 3.0, 2.0, 5.0, 5.0];
        let groups = vec![crate::rerank::QueryGroup::new("q", 0..3)];
        let set = RankSet::new(names, x, vec![1, 0, 1], groups, None).unwrap();
        // Min-max: the grade-1 rows become (0, 0) and (1, 1).
        let norm = Normalizer::fit(NormKind::MinMax, &set.x, 2).unwrap();
        let data = Prepared::new(&set, &norm);
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        for (u, copies) in [(1.0f32, true), (0.0, false), (0.9, false)] {
            let mut rows = Rows {
                sample: None,
                mixup: Some(u),
                rng: &mut rng,
            };
            let (mut xs, mut labels) = (Vec::new(), Vec::new());
            rows.gather(&data, 0..3, &mut xs, &mut labels);
            assert_eq!(labels, [1, 0, 1, 1, 1]);
            assert_eq!(&xs[..6], &data.x[..6]);
            let added = &xs[6..];
            if copies {
                assert_eq!(added, [0.0, 0.0, 1.0, 1.0]);
            }
            for row in added.chunks(2) {
                // On the segment from (0, 0) to (1, 1).
                assert!((0.0..=1.0).contains(&row[0]), "{row:?}");
                assert!((row[1] - row[0]).abs() < 1e-6, "{row:?}");
            }
        }
    }

    /// An ensemble's first member is the plain run with the same seed, member k is the plain
    /// run with [`member_seed`]`(seed, k)`, and the model scores with their mean; linear
    /// members are folded into one network with the mean parameters.
    #[test]
    fn ensemble_members_are_plain_runs_with_member_seeds() {
        let set = synthetic(40, 6);
        let (train_set, valid) = set.split_validation(0.25, 1).unwrap();
        let cancel = AtomicBool::new(false);
        for hidden in [vec![], vec![6]] {
            let plain = |seed| {
                let c = TrainConfig {
                    seed,
                    ..config(ObjectiveKind::StableAp, hidden.clone())
                };
                train(&train_set, Some(&valid), &c, &mut |_| {}, &cancel).unwrap()
            };
            let (m0, m1) = (plain(42), plain(member_seed(42, 1)));
            assert_ne!(m0.model.networks, m1.model.networks);
            let c = with(config(ObjectiveKind::StableAp, hidden.clone()), |n| {
                n.ensemble = 2
            });
            let mut members_seen = Vec::new();
            let e = train(
                &train_set,
                Some(&valid),
                &c,
                &mut |l| members_seen.push(l.member),
                &cancel,
            )
            .unwrap();
            assert_eq!(e.log.len(), m0.log.len() + m1.log.len());
            assert_eq!(
                members_seen.iter().filter(|&&m| m == 1).count(),
                m1.log.len()
            );
            let t = &e.model.training;
            assert_eq!(
                (t.ensemble, t.best_epoch),
                (2, m0.model.training.best_epoch)
            );
            assert_eq!(
                t.member_best_epochs,
                [m0.model.training.best_epoch, m1.model.training.best_epoch]
            );
            if hidden.is_empty() {
                let (p0, p1) = (&m0.model.networks[0].params, &m1.model.networks[0].params);
                let mean: Vec<f32> = p0.iter().zip(p1).map(|(a, b)| (a + b) / 2.0).collect();
                assert_eq!(e.model.networks.len(), 1);
                for (got, want) in e.model.networks[0].params.iter().zip(&mean) {
                    assert!((got - want).abs() <= 1e-6 * (1.0 + want.abs()));
                }
            } else {
                assert_eq!(
                    e.model.networks,
                    [m0.model.networks[0].clone(), m1.model.networks[0].clone()]
                );
            }
            // Scores: the mean of the two members' scores.
            let rows = &valid.x[..valid.num_features() * 5];
            let (s0, s1) = (
                m0.model.score(rows, 5).unwrap(),
                m1.model.score(rows, 5).unwrap(),
            );
            for (r, got) in e.model.score(rows, 5).unwrap().iter().enumerate() {
                let want = (s0[r] + s1[r]) / 2.0;
                assert!(
                    (got - want).abs() < 1e-5 * (1.0 + want.abs()),
                    "{got} vs {want}"
                );
            }
        }
    }

    /// Tail averaging changes the kept network, stays deterministic, and the stored
    /// validation MAP is that of the kept (averaged) network at its logged best epoch.
    #[test]
    fn averaged_epochs_are_evaluated_and_kept() {
        let set = synthetic(40, 7);
        let (train_set, valid) = set.split_validation(0.25, 1).unwrap();
        let cancel = AtomicBool::new(false);
        let plain = config(ObjectiveKind::Ranknet, vec![6]);
        let averaged = with(plain.clone(), |n| n.average_epochs = 3);
        let p = train(&train_set, Some(&valid), &plain, &mut |_| {}, &cancel).unwrap();
        let a = train(&train_set, Some(&valid), &averaged, &mut |_| {}, &cancel).unwrap();
        let again = train(&train_set, Some(&valid), &averaged, &mut |_| {}, &cancel).unwrap();
        assert_eq!(a.model.networks, again.model.networks);
        assert_ne!(a.model.networks, p.model.networks);
        assert_eq!(a.model.training.average_epochs, 3);
        let best = a.model.training.best_epoch;
        let logged = a.log.iter().find(|l| l.epoch == best).unwrap();
        assert!(logged.best);
        let stored = a.model.training.metrics.valid.as_ref().unwrap().map;
        assert!(
            (stored - logged.valid_map).abs() < 1e-12,
            "{stored} vs {logged:?}"
        );
        let bad = with(plain, |n| n.average_epochs = 0);
        let err = train(&train_set, None, &bad, &mut |_| {}, &cancel)
            .err()
            .unwrap();
        assert!(err
            .to_string()
            .contains("average_epochs must be in 1..=100, got 0"));
    }

    /// The learning-rate schedule, replayed from the log's improvement flags: the rate halves
    /// after every run of `lr_halve_after` epochs without a better validation MAP.
    #[test]
    fn learning_rate_halves_after_epochs_without_improvement() {
        let set = synthetic(40, 8);
        let (train_set, valid) = set.split_validation(0.25, 1).unwrap();
        let cancel = AtomicBool::new(false);
        let c = with(config(ObjectiveKind::Ranknet, vec![4]), |n| {
            n.lr_halve_after = 2;
            n.epochs = 30;
            n.patience = 30;
        });
        let out = train(&train_set, Some(&valid), &c, &mut |_| {}, &cancel).unwrap();
        let (mut lr, mut since_best, mut halvings) = (0.05, 0, 0);
        for line in &out.log {
            assert_eq!(line.lr, lr, "epoch {}", line.epoch);
            if line.best {
                since_best = 0;
            } else {
                since_best += 1;
                if since_best % 2 == 0 {
                    lr *= 0.5;
                    halvings += 1;
                }
            }
        }
        assert!(halvings > 0, "the test must exercise a halving");
        assert_eq!(out.model.training.lr_halve_after, 2);
        assert_eq!(
            out.model.training.optimizer.as_ref().unwrap().lr,
            0.05,
            "the file keeps the initial rate"
        );
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
