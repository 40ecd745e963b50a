//! Regression EM (SPEC §11; Wang, Golbandi, Bendersky, Metzler, Najork 2018): the
//! position-based model with each pair's attractiveness a function of its features,
//! `γ_{q,d} = σ(w · x̂_{q,d} + b)` over the standardised features x̂ of the LETOR row.
//!
//! The E-step is the position-based model's ([`super::pbm`]); the M-step sets θ_k to the mean
//! examination posterior of its rank, as PBM does, and fits the logistic model to the
//! attraction posteriors — each pair's posteriors summed, a cross-entropy weighted by its
//! impressions — with Adam steps warm-started from the previous iteration (a generalised EM:
//! each M-step improves the expected log-likelihood rather than maximising it). Sharing
//! weights across pairs is what the per-pair models cannot do: a pair shown twice borrows the
//! evidence of every pair with features like its own, so examination is separated from
//! attractiveness even where the log has few clicks per pair.
//!
//! The logistic fit is written here rather than taken from a crate: it is a few dozen lines of
//! gradient steps over at most a few thousand pairs, and the crates that fit logistic
//! regression (linfa, smartcore) would bring a linear-algebra stack for it.

use std::collections::HashMap;

use super::sessions::RowSession;
use super::{clamp, Attractiveness, ClickModel, Parameters, Session};
use crate::error::Invalid;
use crate::rerank::RankSet;

/// Adam steps of the logistic fit per EM iteration.
const STEPS_PER_ITERATION: usize = 25;
/// Adam's step size on the standardised features.
const LEARNING_RATE: f64 = 0.05;
/// L2 penalty on the weights (not the bias), per impression.
const L2: f64 = 1e-3;

/// A fitted regression-EM model.
#[derive(Debug, Clone)]
pub struct RegressionEm {
    /// `theta[k]`: examination probability of rank k + 1.
    pub theta: Vec<f64>,
    /// Weights over the standardised features, and the bias.
    pub weights: Vec<f64>,
    pub bias: f64,
    /// The pairs the model was fitted on, with their attractiveness, for reports.
    fitted: Attractiveness,
    /// Each query's rows in the feature set, to score a pair it was not fitted on.
    features: HashMap<String, Vec<Vec<f64>>>,
}

impl RegressionEm {
    /// Fits the model to sessions over `set`'s rows (checked with
    /// [`super::sessions::check`]) with `iterations` rounds of EM from θ = 0.5, w = 0.
    pub fn fit(
        sessions: &[RowSession],
        set: &RankSet,
        iterations: usize,
    ) -> Result<RegressionEm, Invalid> {
        super::sessions::check(sessions, set)?;
        let nf = set.feature_names.len();
        let by_qid = set.query_index();
        // Number the shown pairs; keep their global row.
        let mut index: HashMap<(usize, usize), usize> = HashMap::new();
        let mut rows: Vec<usize> = Vec::new();
        let mut impressions: Vec<(usize, usize, bool)> = Vec::new();
        let mut depth = 0;
        for s in sessions {
            let q = &set.queries[by_qid[s.qid.as_str()]];
            depth = depth.max(s.shown.len());
            for (k, &row) in s.shown.iter().enumerate() {
                let global = q.rows.start + row;
                let pair = *index
                    .entry((by_qid[s.qid.as_str()], row))
                    .or_insert_with(|| {
                        rows.push(global);
                        rows.len() - 1
                    });
                impressions.push((k, pair, s.clicks.contains(&row)));
            }
        }
        // Standardise over the shown pairs (a constant feature gets scale 1).
        let row = |r: usize| &set.x[r * nf..(r + 1) * nf];
        let mut mean = vec![0.0; nf];
        for &r in &rows {
            for (m, &v) in mean.iter_mut().zip(row(r)) {
                *m += f64::from(v);
            }
        }
        let n_pairs = rows.len().max(1) as f64;
        mean.iter_mut().for_each(|m| *m /= n_pairs);
        let mut scale = vec![0.0; nf];
        for &r in &rows {
            for ((s, &v), m) in scale.iter_mut().zip(row(r)).zip(&mean) {
                *s += (f64::from(v) - m).powi(2);
            }
        }
        for s in &mut scale {
            let sd = (*s / n_pairs).sqrt();
            *s = if sd > 1e-12 { sd } else { 1.0 };
        }
        let standard = |r: usize| -> Vec<f64> {
            row(r)
                .iter()
                .zip(&mean)
                .zip(&scale)
                .map(|((&v, m), s)| (f64::from(v) - m) / s)
                .collect()
        };
        let x: Vec<Vec<f64>> = rows.iter().map(|&r| standard(r)).collect();

        let mut theta = vec![0.5; depth];
        let mut weights = vec![0.0; nf];
        let mut bias = 0.0;
        let mut adam = Adam::new(nf + 1);
        let gamma_of = |w: &[f64], b: f64, x: &[f64]| -> f64 {
            clamp(sigmoid(
                b + w.iter().zip(x).map(|(a, b)| a * b).sum::<f64>(),
            ))
        };
        for _ in 0..iterations {
            let gamma: Vec<f64> = x.iter().map(|xi| gamma_of(&weights, bias, xi)).collect();
            let (theta_sum, r_sum) = super::e_step(impressions.iter().copied(), &theta, &gamma);
            super::set_means(&mut theta, &theta_sum, |sum, n| clamp(sum / n as f64));
            // M-step for the logistic model: cross-entropy of σ(z) against the pairs' summed
            // posteriors, per impression.
            let total: f64 = r_sum.iter().map(|&(_, n)| n as f64).sum::<f64>().max(1.0);
            for _ in 0..STEPS_PER_ITERATION {
                let mut grad = vec![0.0; nf + 1];
                for (xi, &(sum, n)) in x.iter().zip(&r_sum) {
                    let p = sigmoid(bias + weights.iter().zip(xi).map(|(a, b)| a * b).sum::<f64>());
                    let g = (n as f64 * p - sum) / total;
                    for (gj, xj) in grad.iter_mut().zip(xi) {
                        *gj += g * xj;
                    }
                    grad[nf] += g;
                }
                for (gj, wj) in grad.iter_mut().zip(&weights) {
                    *gj += L2 * wj;
                }
                let step = adam.step(&grad);
                for (wj, s) in weights.iter_mut().zip(&step) {
                    *wj -= s;
                }
                bias -= step[nf];
            }
        }
        let fitted = Attractiveness {
            by_pair: index
                .iter()
                .map(|(&(q, row), &pair)| {
                    (
                        (set.queries[q].qid.clone(), row.to_string()),
                        gamma_of(&weights, bias, &x[pair]),
                    )
                })
                .collect(),
            prior: 0.5,
        };
        let features = set
            .queries
            .iter()
            .map(|q| (q.qid.clone(), q.rows.clone().map(standard).collect()))
            .collect();
        Ok(RegressionEm {
            theta,
            weights,
            bias,
            fitted,
            features,
        })
    }
}

fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

/// Adam (Kingma & Ba 2015) with the usual β₁ = 0.9, β₂ = 0.999.
struct Adam {
    m: Vec<f64>,
    v: Vec<f64>,
    t: i32,
}

impl Adam {
    fn new(n: usize) -> Adam {
        Adam {
            m: vec![0.0; n],
            v: vec![0.0; n],
            t: 0,
        }
    }

    fn step(&mut self, grad: &[f64]) -> Vec<f64> {
        self.t += 1;
        let (b1, b2) = (0.9f64, 0.999f64);
        let (c1, c2) = (1.0 - b1.powi(self.t), 1.0 - b2.powi(self.t));
        grad.iter()
            .zip(self.m.iter_mut().zip(self.v.iter_mut()))
            .map(|(&g, (m, v))| {
                *m = b1 * *m + (1.0 - b1) * g;
                *v = b2 * *v + (1.0 - b2) * g * g;
                LEARNING_RATE * (*m / c1) / ((*v / c2).sqrt() + 1e-8)
            })
            .collect()
    }
}

impl ClickModel for RegressionEm {
    fn click_probabilities(&self, session: &Session) -> Vec<f64> {
        session
            .shown
            .iter()
            .zip(&session.clicks)
            .enumerate()
            .map(|(k, (doc, &clicked))| {
                let theta = super::rank_examination(&self.theta, k + 1);
                let p = theta * self.attractiveness(&session.query, doc);
                super::observed(p, clicked)
            })
            .collect()
    }

    fn examination(&self, rank: usize) -> Option<f64> {
        Some(super::rank_examination(&self.theta, rank))
    }

    /// From the features of the pair's row, fitted on it or not; 0.5 for a pair outside the
    /// feature set.
    fn attractiveness(&self, query: &str, doc: &str) -> f64 {
        let x = doc
            .parse::<usize>()
            .ok()
            .and_then(|row| self.features.get(query)?.get(row));
        x.map_or(0.5, |x| {
            clamp(sigmoid(
                self.bias + self.weights.iter().zip(x).map(|(a, b)| a * b).sum::<f64>(),
            ))
        })
    }

    fn parameters(&self) -> Parameters {
        Parameters {
            model: "regression_em",
            examination: self.theta.iter().map(|&t| vec![t]).collect(),
            continuation: None,
            pairs: self.fitted.pairs(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rerank::QueryGroup;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    const THETA: [f64; 6] = [1.0, 0.5, 1.0 / 3.0, 0.25, 0.2, 1.0 / 6.0];

    /// 200 queries of 12 documents, each with 3 features; the truth's attractiveness is a
    /// logistic function of the first two (the third is noise). Every pair is shown in only
    /// a few sessions: the per-pair PBM has little to go on, the shared weights do.
    fn world(seed: u64) -> (RankSet, Vec<RowSession>, impl Fn(&[f32]) -> f64) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (nq, nd) = (200, 12);
        let mut x = Vec::new();
        let mut queries = Vec::new();
        for q in 0..nq {
            queries.push(QueryGroup::new(format!("{q}"), q * nd..(q + 1) * nd));
            for _ in 0..nd {
                for _ in 0..3 {
                    x.push(rng.random::<f32>() * 2.0 - 1.0);
                }
            }
        }
        let truth = |f: &[f32]| sigmoid(2.0 * f64::from(f[0]) - 1.5 * f64::from(f[1]) - 0.5);
        let set = RankSet::new(
            vec!["a".into(), "b".into(), "c".into()],
            x,
            vec![0; nq * nd],
            queries,
            None,
        )
        .unwrap();
        let mut sessions = Vec::new();
        for i in 0..6000 {
            let q = i % nq;
            let mut order: Vec<usize> = (0..nd).collect();
            rand::seq::SliceRandom::shuffle(order.as_mut_slice(), &mut rng);
            order.truncate(THETA.len());
            let clicks = order
                .iter()
                .enumerate()
                .filter(|&(k, &d)| {
                    let f = &set.x[(q * nd + d) * 3..(q * nd + d + 1) * 3];
                    rng.random::<f64>() < THETA[k] * truth(f)
                })
                .map(|(_, &d)| d)
                .collect();
            sessions.push(RowSession {
                qid: format!("{q}"),
                shown: order,
                clicks,
            });
        }
        (set, sessions, truth)
    }

    #[test]
    fn recovers_position_bias_and_attractiveness_from_features() {
        let (set, sessions, truth) = world(4);
        let model = RegressionEm::fit(&sessions, &set, 60).unwrap();
        for (k, t) in THETA.iter().enumerate() {
            let got = model.theta[k] / model.theta[0];
            assert!((got - t).abs() < 0.05, "rank {}: {got} vs {t}", k + 1);
        }
        // Attractiveness of every row (shown or not) against the truth, up to PBM's scale.
        let scale = model.theta[0];
        let mut worst = 0.0f64;
        for q in &set.queries {
            for (i, r) in q.rows.clone().enumerate() {
                let a = model.attractiveness(&q.qid, &i.to_string()) * scale;
                worst = worst.max((a - truth(&set.x[r * 3..(r + 1) * 3])).abs());
            }
        }
        assert!(worst < 0.08, "worst attractiveness error {worst}");
        // The noise feature carries little weight.
        assert!(
            model.weights[2].abs() < 0.2 * model.weights[0].abs(),
            "{:?}",
            model.weights
        );
    }

    #[test]
    fn sessions_outside_the_feature_set_are_refused() {
        let (set, _, _) = world(1);
        let bad = [RowSession {
            qid: "nope".into(),
            shown: vec![0],
            clicks: vec![],
        }];
        assert!(RegressionEm::fit(&bad, &set, 5).is_err());
    }
}
