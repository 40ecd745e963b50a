//! Click models (SPEC §11): what a user's clicks say about a result list once the position
//! they were shown at is accounted for.
//!
//! A click is a noisy, position-biased vote: people examine the top of a list more than the
//! rest, so a document clicked at rank 1 is weaker evidence than one clicked at rank 8. A click
//! model separates *examination* (depends on the position) from *attractiveness* (depends on
//! the query and the document); its examination probabilities are the propensities unbiased
//! learning divides by, its attractiveness a relevance estimate per (query, document).
//!
//! - [`pbm::Pbm`]: position-based model, fitted by expectation–maximisation.
//! - [`cascade::Cascade`]: the user scans down and stops at the first click; closed form.
//! - [`ubm::Ubm`]: examination depends on the rank and the distance to the previous click;
//!   fitted by expectation–maximisation.
//! - [`regression_em::RegressionEm`]: the position-based model with attractiveness a logistic
//!   function of the pair's features, fitted by regression EM.
//! - [`dbn::Dbn`]: the dynamic Bayesian network, a cascade where a click can leave the user
//!   unsatisfied and scanning on; fitted by expectation–maximisation.
//!
//! - [`sessions`], [`semi_synthetic`], [`ips`]: sessions over a LETOR file's rows, the
//!   semi-synthetic protocol that draws them from expert labels, and training sets that weight
//!   each click by its inverse propensity (`rankd simulate-clicks`,
//!   `rankd eval-letor --train-clicks`).
//!
//! Every model reports the conditional probability of each observed click given the clicks
//! above it ([`ClickModel::click_probabilities`]), from which [`evaluate`] computes the
//! log-likelihood and the per-rank perplexity the literature compares click models by.
//!
//! Written here rather than taken from a crate: no maintained Rust crate implements click
//! models (PyClick and `clax` are Python); the models are a few hundred lines of counting.

pub mod cascade;
pub mod dbn;
pub mod ips;
pub mod pairwise;
pub mod pbm;
pub mod regression_em;
pub mod semi_synthetic;
pub mod sessions;
pub mod ubm;

use std::collections::HashMap;

use serde::Serialize;

use crate::rerank::RankSet;

/// One result list shown for a query, and which of its positions were clicked.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub query: String,
    /// Document ids in the order shown (rank 1 first).
    pub shown: Vec<String>,
    /// `clicks[k]`: whether the document at rank k + 1 was clicked; as long as `shown`.
    pub clicks: Vec<bool>,
}

/// A (query, document) pair's key in the models' tables.
pub(crate) type Pair = (String, String);

/// Probabilities never reach 0 or 1 in a fitted model: a log-likelihood must stay finite on
/// unseen data, and EM's posteriors divide by `1 − θγ`.
pub(crate) const EPSILON: f64 = 1e-6;

/// A Beta prior on each (query, document) pair's probabilities (attractiveness, the DBN's
/// satisfaction): the M-step's estimate from the sum of a pair's `n` posteriors is
/// `(sum + clicks) / (n + clicks + skips)`, the posterior mode under Beta(clicks + 1, skips + 1).
///
/// Most pairs are shown a handful of times, and their maximum-likelihood attractiveness is 0 or
/// 1 after a few EM rounds: a model that never saw a pair clicked then calls a later click
/// impossible, and its held-out log-likelihood falls with every iteration. The default, one
/// click in five impressions, measured best of the priors tried on held-out sessions
/// (docs/EVALUATION.md, "Click models"); [`BetaPrior::NONE`] is maximum likelihood.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BetaPrior {
    pub clicks: f64,
    pub skips: f64,
}

impl BetaPrior {
    pub const NONE: BetaPrior = BetaPrior {
        clicks: 0.0,
        skips: 0.0,
    };
    pub const DEFAULT: BetaPrior = BetaPrior {
        clicks: 1.0,
        skips: 4.0,
    };

    /// The estimate from `sum` of `n` posteriors (or observed clicks).
    pub(crate) fn estimate(self, sum: f64, n: usize) -> f64 {
        clamp((sum + self.clicks) / (n as f64 + self.clicks + self.skips))
    }

    /// Checks that both pseudo-counts are finite and not negative.
    pub fn validate(self) -> Result<(), crate::error::Invalid> {
        if [self.clicks, self.skips]
            .iter()
            .all(|v| v.is_finite() && *v >= 0.0)
        {
            Ok(())
        } else {
            Err(crate::error::Invalid(format!(
                "a click model's prior needs finite pseudo-counts ≥ 0, got {} clicks and {} skips",
                self.clicks, self.skips
            )))
        }
    }
}

impl Default for BetaPrior {
    fn default() -> Self {
        BetaPrior::DEFAULT
    }
}

/// The probability of what was observed at a rank, from the model's click probability `p`.
pub(crate) fn observed(p: f64, clicked: bool) -> f64 {
    if clicked {
        p
    } else {
        1.0 - p
    }
}

/// A per-rank examination table's value at 1-based `rank` (ε beyond the deepest rank fitted).
pub(crate) fn rank_examination(theta: &[f64], rank: usize) -> f64 {
    theta
        .get(rank.saturating_sub(1))
        .copied()
        .unwrap_or(EPSILON)
}

pub(crate) fn clamp(p: f64) -> f64 {
    p.clamp(EPSILON, 1.0 - EPSILON)
}

/// A fitted click model.
pub trait ClickModel {
    /// `P(c_k = observed | c_1..c_{k−1})` for every rank k of `session`.
    fn click_probabilities(&self, session: &Session) -> Vec<f64>;

    /// The probability that the document at `rank` (1-based) is examined whatever the rest of
    /// the list: the propensity unbiased learning weights a click at that rank by. `None` where
    /// the model makes examination depend on the documents above (the cascade model).
    fn examination(&self, rank: usize) -> Option<f64>;

    /// The attractiveness of `doc` for `query` (the model's prior for a pair it never saw).
    fn attractiveness(&self, query: &str, doc: &str) -> f64;

    /// Every fitted parameter, for a report or another implementation to check against.
    fn parameters(&self) -> Parameters;
}

/// A fitted model's parameters, as `rankd click-model --parameters` writes them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Parameters {
    /// `pbm`, `ubm`, `cascade`, `dbn` or `regression_em`.
    pub model: &'static str,
    /// Examination by rank (index 0: rank 1); for the user browsing model, row k holds rank
    /// k + 1's examination at distance 1..=k + 1 from the previous click (k + 1: no click
    /// above). Empty where the model has none (cascade, DBN).
    pub examination: Vec<Vec<f64>>,
    /// The DBN's perseverance γ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub continuation: Option<f64>,
    /// Per (query, document) pair, sorted by query then document.
    pub pairs: Vec<PairParameters>,
}

/// One (query, document) pair's parameters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairParameters {
    pub query: String,
    pub doc: String,
    pub attractiveness: f64,
    /// The DBN's satisfaction after a click.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub satisfaction: Option<f64>,
}

/// Log-likelihood and perplexity of a model on sessions (SPEC §11).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fit {
    /// Mean over impressions (one per shown position) of `ln P(c_k)`.
    pub log_likelihood: f64,
    /// `2^{−(1/N) Σ log₂ P(c_k)}` over the impressions at each rank (index 0: rank 1).
    pub perplexity_at: Vec<f64>,
    /// The mean of [`Fit::perplexity_at`].
    pub perplexity: f64,
}

/// The click models rankd fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum ModelKind {
    Pbm,
    Ubm,
    Cascade,
    Dbn,
    /// Needs the pairs' features (a LETOR file).
    RegressionEm,
}

impl ModelKind {
    /// The models that need no features.
    pub const ALL: [ModelKind; 4] = [
        ModelKind::Pbm,
        ModelKind::Ubm,
        ModelKind::Cascade,
        ModelKind::Dbn,
    ];

    /// Fits this model to `sessions` (`iterations` of EM where it uses EM); regression EM
    /// reads the documents' features from `features` and is refused without them.
    pub fn fit(
        self,
        sessions: &[Session],
        features: Option<Features>,
        iterations: usize,
        prior: BetaPrior,
    ) -> Result<Box<dyn ClickModel>, crate::error::Invalid> {
        Ok(match self {
            ModelKind::Pbm => Box::new(pbm::Pbm::fit(sessions, iterations, prior)),
            ModelKind::Ubm => Box::new(ubm::Ubm::fit(sessions, iterations, prior)),
            ModelKind::Cascade => Box::new(cascade::Cascade::fit(sessions, prior)),
            ModelKind::Dbn => Box::new(dbn::Dbn::fit(sessions, iterations, prior)),
            ModelKind::RegressionEm => {
                let f = features.ok_or_else(|| {
                    crate::error::Invalid(
                        "regression EM needs the documents' features: give the LETOR file the \
                         sessions' rows are in"
                            .into(),
                    )
                })?;
                Box::new(regression_em::RegressionEm::fit(
                    f.sessions, f.set, iterations,
                )?)
            }
        })
    }
}

/// One model fitted on some sessions and evaluated on others.
#[derive(Debug, Clone, Serialize)]
pub struct ModelReport {
    pub model: ModelKind,
    /// Log-likelihood per impression on the sessions it was fitted to.
    pub train_log_likelihood: f64,
    /// On the held-out sessions.
    pub test: Fit,
    /// Examination by rank relative to rank 1 (before any click, for the user browsing
    /// model); empty where examination depends on the documents above.
    pub examination_relative: Vec<f64>,
    /// The DBN's perseverance γ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub continuation: Option<f64>,
    #[serde(skip)]
    pub parameters: Parameters,
}

/// The training sessions as rows of a LETOR set, whose features regression EM reads.
#[derive(Clone, Copy)]
pub struct Features<'a> {
    /// The same sessions as the generic ones, by row (checked against `set`).
    pub sessions: &'a [sessions::RowSession],
    pub set: &'a RankSet,
}

/// Fits `kind` to `train` and evaluates it on `test` (SPEC §11, "Evaluating a click model");
/// `features` gives regression EM the training sessions' rows and their features.
pub fn fit_and_evaluate(
    kind: ModelKind,
    train: &[Session],
    test: &[Session],
    features: Option<Features>,
    iterations: usize,
    prior: BetaPrior,
) -> Result<ModelReport, crate::error::Invalid> {
    prior.validate()?;
    let model = kind.fit(train, features, iterations, prior)?;
    let parameters = model.parameters();
    let depth = depth(train);
    let examination: Vec<f64> = (1..=depth).filter_map(|k| model.examination(k)).collect();
    let examination_relative = if examination.len() == depth && depth > 0 {
        examination.iter().map(|e| e / examination[0]).collect()
    } else {
        Vec::new()
    };
    Ok(ModelReport {
        model: kind,
        train_log_likelihood: evaluate(model.as_ref(), train).log_likelihood,
        test: evaluate(model.as_ref(), test),
        examination_relative,
        continuation: parameters.continuation,
        parameters,
    })
}

/// How well `model` explains `sessions`.
pub fn evaluate(model: &dyn ClickModel, sessions: &[Session]) -> Fit {
    let mut total = 0.0;
    let mut n = 0usize;
    let mut by_rank: Vec<(f64, usize)> = Vec::new();
    for s in sessions {
        for (k, p) in model.click_probabilities(s).into_iter().enumerate() {
            // The models' parameters stay within [ε, 1 − ε], so every probability is positive;
            // the floor only keeps a model that breaks that from making the sum infinite.
            let p = p.max(f64::MIN_POSITIVE);
            total += p.ln();
            n += 1;
            if by_rank.len() <= k {
                by_rank.resize(k + 1, (0.0, 0));
            }
            by_rank[k].0 += p.log2();
            by_rank[k].1 += 1;
        }
    }
    let perplexity_at: Vec<f64> = by_rank
        .iter()
        .map(|&(sum, count)| 2f64.powf(-sum / count as f64))
        .collect();
    let perplexity = perplexity_at.iter().sum::<f64>() / perplexity_at.len().max(1) as f64;
    Fit {
        log_likelihood: if n == 0 { 0.0 } else { total / n as f64 },
        perplexity_at,
        perplexity,
    }
}

/// The deepest rank any session shows.
pub(crate) fn depth(sessions: &[Session]) -> usize {
    sessions.iter().map(|s| s.shown.len()).max().unwrap_or(0)
}

/// The impressions of `s`: `(0-based rank k, distance d ≥ 1 to the previous click (k + 1
/// before the first), document, clicked)`.
pub(crate) fn impressions_of(s: &Session) -> impl Iterator<Item = (usize, usize, &String, bool)> {
    let mut last_click = 0;
    s.shown
        .iter()
        .zip(&s.clicks)
        .enumerate()
        .map(move |(k, (doc, &clicked))| {
            let d = k + 1 - last_click;
            if clicked {
                last_click = k + 1;
            }
            (k, d, doc, clicked)
        })
}

/// `P(c_k = observed)` for each impression of `session` in a model where a click is
/// examination `theta(k, d)` times attractiveness (PBM, UBM).
pub(crate) fn examined_clicks(
    session: &Session,
    theta: impl Fn(usize, usize) -> f64,
    gamma: &Attractiveness,
) -> Vec<f64> {
    impressions_of(session)
        .map(|(k, d, doc, clicked)| {
            let p = theta(k, d) * gamma.get(&session.query, doc);
            observed(p, clicked)
        })
        .collect()
}

/// Sessions as flat impressions over numbered (query, document) pairs: what EM iterates over,
/// so an iteration indexes arrays instead of hashing strings.
pub(crate) struct Impressions {
    pub pairs: Vec<Pair>,
    /// `(0-based rank, distance to the previous click (rank + 1 before the first), pair,
    /// clicked)`.
    pub rows: Vec<(usize, usize, usize, bool)>,
}

impl Impressions {
    pub fn of(sessions: &[Session]) -> Impressions {
        let mut index: HashMap<Pair, usize> = HashMap::new();
        let mut pairs = Vec::new();
        let mut rows = Vec::new();
        for s in sessions {
            for (k, d, doc, clicked) in impressions_of(s) {
                let pair = (s.query.clone(), doc.clone());
                let i = *index.entry(pair.clone()).or_insert_with(|| {
                    pairs.push(pair);
                    pairs.len() - 1
                });
                rows.push((k, d, i, clicked));
            }
        }
        Impressions { pairs, rows }
    }

    /// Attractiveness from one value per pair.
    pub fn attractiveness(&self, gamma: &[f64], prior: f64) -> Attractiveness {
        Attractiveness {
            by_pair: self
                .pairs
                .iter()
                .cloned()
                .zip(gamma.iter().copied())
                .collect(),
            prior,
        }
    }
}

/// One EM iteration of a model whose examination is `theta[slot(rank, distance)]` and whose
/// attractiveness is one value per pair (PBM, UBM): the E-step's posteriors of examination and
/// attractiveness for each impression (1 and 1 when clicked), the M-step's means.
pub(crate) fn em_step(
    impressions: &Impressions,
    theta: &mut [f64],
    gamma: &mut [f64],
    slot: impl Fn(usize, usize) -> usize,
    prior: BetaPrior,
) {
    let rows = impressions
        .rows
        .iter()
        .map(|&(k, d, pair, clicked)| (slot(k, d), pair, clicked));
    let (theta_sum, gamma_sum) = e_step(rows, theta, gamma);
    set_means(theta, &theta_sum, |sum, n| clamp(sum / n as f64));
    set_means(gamma, &gamma_sum, |sum, n| prior.estimate(sum, n));
}

/// Per slot (or pair): the sum of posteriors and the impressions counted.
pub(crate) type Sums = Vec<(f64, usize)>;

/// The E-step of a model where a click is examination `theta[slot]` times attraction
/// `gamma[pair]`, over `(slot, pair, clicked)` impressions: per slot and per pair, the sum of
/// the posteriors of examination (of attraction) and the impressions counted.
/// `P(E=1 | c=0) = θ(1 − γ)/(1 − θγ)`, `P(R=1 | c=0) = (1 − θ)γ/(1 − θγ)`; both 1 on a click.
pub(crate) fn e_step(
    rows: impl Iterator<Item = (usize, usize, bool)>,
    theta: &[f64],
    gamma: &[f64],
) -> (Sums, Sums) {
    let mut theta_sum = vec![(0.0, 0usize); theta.len()];
    let mut gamma_sum = vec![(0.0, 0usize); gamma.len()];
    for (t, pair, clicked) in rows {
        let (th, g) = (theta[t], gamma[pair]);
        let (e, r) = if clicked {
            (1.0, 1.0)
        } else {
            let none = 1.0 - th * g;
            (th * (1.0 - g) / none, (1.0 - th) * g / none)
        };
        theta_sum[t].0 += e;
        theta_sum[t].1 += 1;
        gamma_sum[pair].0 += r;
        gamma_sum[pair].1 += 1;
    }
    (theta_sum, gamma_sum)
}

/// The M-step's update of each value that has observations: `estimate(sum, count)`.
pub(crate) fn set_means(
    values: &mut [f64],
    sums: &[(f64, usize)],
    estimate: impl Fn(f64, usize) -> f64,
) {
    for (v, &(sum, n)) in values.iter_mut().zip(sums) {
        if n > 0 {
            *v = estimate(sum, n);
        }
    }
}

/// Attractiveness per (query, document), with the prior for unseen pairs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Attractiveness {
    pub by_pair: HashMap<Pair, f64>,
    pub prior: f64,
}

impl Attractiveness {
    pub fn get(&self, query: &str, doc: &str) -> f64 {
        self.by_pair
            .get(&(query.to_string(), doc.to_string()))
            .copied()
            .unwrap_or(self.prior)
    }

    /// Every pair's value, sorted by query then document.
    pub fn pairs(&self) -> Vec<PairParameters> {
        let mut pairs: Vec<PairParameters> = self
            .by_pair
            .iter()
            .map(|((query, doc), &a)| PairParameters {
                query: query.clone(),
                doc: doc.clone(),
                attractiveness: a,
                satisfaction: None,
            })
            .collect();
        pairs.sort_by(|x, y| (&x.query, &x.doc).cmp(&(&y.query, &y.doc)));
        pairs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One click in one impression: maximum likelihood says 1 (clamped), the default prior
    /// (1 + 1)/(1 + 5).
    #[test]
    fn the_prior_adds_pseudo_counts() {
        assert_eq!(BetaPrior::NONE.estimate(1.0, 1), 1.0 - EPSILON);
        assert!((BetaPrior::DEFAULT.estimate(1.0, 1) - 2.0 / 6.0).abs() < 1e-15);
        assert!((BetaPrior::DEFAULT.estimate(0.0, 0) - 0.2).abs() < 1e-15);
        assert!(BetaPrior {
            clicks: -1.0,
            skips: 1.0
        }
        .validate()
        .is_err());
        assert!(BetaPrior {
            clicks: f64::NAN,
            skips: 1.0
        }
        .validate()
        .is_err());
    }
}

#[cfg(test)]
pub(crate) mod simulate {
    //! Sessions drawn from known parameters, for the tests' ground truth.
    use super::Session;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// `n` sessions of `queries` queries showing `docs` documents each in a random order,
    /// clicks drawn from a position-based model with examination `theta[k]` and
    /// attractiveness `gamma(q, d)`.
    pub fn pbm(
        n: usize,
        queries: usize,
        docs: usize,
        theta: &[f64],
        gamma: impl Fn(usize, usize) -> f64,
        seed: u64,
    ) -> Vec<Session> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|i| {
                let q = i % queries;
                let mut order: Vec<usize> = (0..docs).collect();
                rand::seq::SliceRandom::shuffle(order.as_mut_slice(), &mut rng);
                order.truncate(theta.len());
                let clicks = order
                    .iter()
                    .enumerate()
                    .map(|(k, &d)| rng.random::<f64>() < theta[k] * gamma(q, d))
                    .collect();
                Session {
                    query: format!("q{q}"),
                    shown: order.iter().map(|d| format!("d{d}")).collect(),
                    clicks,
                }
            })
            .collect()
    }
}
