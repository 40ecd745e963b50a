//! The position-based model (SPEC §11): `P(c_k = 1) = θ_k · γ_{q,d}`, fitted by EM.
//!
//! Each impression is explained by two hidden variables, examination E (probability θ_k of
//! its rank) and attractiveness R (probability γ of its pair); a click means both. The E-step
//! takes each unclicked impression's posteriors `P(E=1 | c=0) = θ(1 − γ)/(1 − θγ)` and
//! `P(R=1 | c=0) = (1 − θ)γ/(1 − θγ)`; the M-step sets θ_k and γ_{q,d} to the means of those
//! posteriors (1 for clicked impressions) over their impressions. Every iteration does not
//! decrease the likelihood (a unit test checks it).

use super::{
    depth, em_step, examined_clicks, Attractiveness, BetaPrior, ClickModel, Impressions, Session,
};

/// EM iterations unless told otherwise (PyClick's default).
pub const DEFAULT_ITERATIONS: usize = 50;

/// A fitted position-based model.
#[derive(Debug, Clone)]
pub struct Pbm {
    /// `theta[k]`: examination probability of rank k + 1.
    pub theta: Vec<f64>,
    gamma: Attractiveness,
}

impl Pbm {
    /// Fits the model to `sessions` with `iterations` rounds of EM from θ = γ = 0.5, with
    /// `prior` on each pair's attractiveness.
    pub fn fit(sessions: &[Session], iterations: usize, prior: BetaPrior) -> Pbm {
        Pbm::fit_observed(sessions, iterations, prior, None)
    }

    /// [`Pbm::fit`], calling `observe` (if any) with the model after each iteration.
    pub(crate) fn fit_observed(
        sessions: &[Session],
        iterations: usize,
        prior: BetaPrior,
        mut observe: Option<&mut dyn FnMut(&Pbm)>,
    ) -> Pbm {
        let impressions = Impressions::of(sessions);
        let mut theta = vec![0.5; depth(sessions)];
        let mut gamma = vec![0.5; impressions.pairs.len()];
        let model = |theta: &[f64], gamma: &[f64]| Pbm {
            theta: theta.to_vec(),
            gamma: impressions.attractiveness(gamma, 0.5),
        };
        for _ in 0..iterations {
            em_step(&impressions, &mut theta, &mut gamma, |k, _| k, prior);
            if let Some(observe) = observe.as_mut() {
                observe(&model(&theta, &gamma));
            }
        }
        model(&theta, &gamma)
    }
}

impl ClickModel for Pbm {
    fn click_probabilities(&self, session: &Session) -> Vec<f64> {
        let theta = |k: usize, _| super::rank_examination(&self.theta, k + 1);
        examined_clicks(session, theta, &self.gamma)
    }

    fn examination(&self, rank: usize) -> Option<f64> {
        Some(super::rank_examination(&self.theta, rank))
    }

    fn attractiveness(&self, query: &str, doc: &str) -> f64 {
        self.gamma.get(query, doc)
    }

    fn parameters(&self) -> super::Parameters {
        super::Parameters {
            model: "pbm",
            examination: self.theta.iter().map(|&t| vec![t]).collect(),
            continuation: None,
            pairs: self.gamma.pairs(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{evaluate, simulate};
    use super::*;

    const THETA: [f64; 6] = [1.0, 0.5, 1.0 / 3.0, 0.25, 0.2, 1.0 / 6.0];

    fn gamma(q: usize, d: usize) -> f64 {
        0.1 + 0.8 * (((q * 7 + d * 3) % 10) as f64 / 9.0)
    }

    /// PBM identifies θ only up to a common factor (θ·c, γ/c explain the same clicks): compare
    /// examination relative to rank 1, as the truth is.
    #[test]
    fn recovers_the_simulators_position_bias() {
        let sessions = simulate::pbm(40_000, 20, 10, &THETA, gamma, 7);
        let model = Pbm::fit(&sessions, 100, BetaPrior::NONE);
        for (k, truth) in THETA.iter().enumerate() {
            let got = model.theta[k] / model.theta[0];
            assert!(
                (got - truth).abs() < 0.03,
                "rank {}: {got} vs {truth}",
                k + 1
            );
        }
        // Attractiveness, scaled by the same factor, ordered as the truth.
        let (a, b) = (
            model.attractiveness("q0", "d3"),
            model.attractiveness("q0", "d1"),
        );
        assert!(gamma(0, 3) > gamma(0, 1) && a > b, "{a} {b}");
    }

    #[test]
    fn em_never_decreases_the_likelihood() {
        let sessions = simulate::pbm(3_000, 5, 8, &THETA, gamma, 1);
        let start = Pbm::fit(&sessions, 0, BetaPrior::NONE);
        let mut last = evaluate(&start, &sessions).log_likelihood;
        let model = Pbm::fit_observed(
            &sessions,
            30,
            BetaPrior::NONE,
            Some(&mut |m: &Pbm| {
                let ll = evaluate(m, &sessions).log_likelihood;
                assert!(ll >= last - 1e-12, "{ll} < {last}");
                last = ll;
            }),
        );
        // And it explains the clicks better than the starting point.
        let start = evaluate(&start, &sessions);
        let fitted = evaluate(&model, &sessions);
        assert!(fitted.perplexity < start.perplexity);
        assert!(fitted
            .perplexity_at
            .iter()
            .all(|&p| (1.0..2.0).contains(&p)));
    }
}
