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
pub mod ips;
pub mod pbm;
pub mod semi_synthetic;
pub mod sessions;
pub mod ubm;

use std::collections::HashMap;

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
}

/// Log-likelihood and perplexity of a model on sessions (SPEC §11).
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    /// Mean over impressions (one per shown position) of `ln P(c_k)`.
    pub log_likelihood: f64,
    /// `2^{−(1/N) Σ log₂ P(c_k)}` over the impressions at each rank (index 0: rank 1).
    pub perplexity_at: Vec<f64>,
    /// The mean of [`Fit::perplexity_at`].
    pub perplexity: f64,
}

/// How well `model` explains `sessions`.
pub fn evaluate(model: &dyn ClickModel, sessions: &[Session]) -> Fit {
    let mut total = 0.0;
    let mut n = 0usize;
    let mut by_rank: Vec<(f64, usize)> = Vec::new();
    for s in sessions {
        for (k, p) in model.click_probabilities(s).into_iter().enumerate() {
            let p = clamp(p);
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

/// Checks that every session has one click flag per shown document.
pub fn validate(sessions: &[Session]) -> Result<(), crate::error::Invalid> {
    for (i, s) in sessions.iter().enumerate() {
        if s.shown.len() != s.clicks.len() {
            return Err(crate::error::Invalid(format!(
                "session {i} (query {:?}) shows {} documents but has {} click flags",
                s.query,
                s.shown.len(),
                s.clicks.len()
            )));
        }
    }
    Ok(())
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
            if clicked {
                p
            } else {
                1.0 - p
            }
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
) {
    let mut theta_sum = vec![(0.0, 0usize); theta.len()];
    let mut gamma_sum = vec![(0.0, 0usize); gamma.len()];
    for &(k, d, pair, clicked) in &impressions.rows {
        let t = slot(k, d);
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
    for (v, &(sum, n)) in theta
        .iter_mut()
        .zip(&theta_sum)
        .chain(gamma.iter_mut().zip(&gamma_sum))
    {
        if n > 0 {
            *v = clamp(sum / n as f64);
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
