//! The user browsing model (SPEC §11; Dupret and Piwowarski 2008): examination `θ_{k,d}`
//! depends on the rank k and the distance d = k − k' to the previous click k' (k' = 0 before
//! the first), attractiveness γ on the pair; a click means both. Fitted by EM as the
//! position-based model is ([`super::pbm`]), with one θ per (rank, distance).

use super::{
    depth, em_step, examined_clicks, Attractiveness, BetaPrior, ClickModel, Impressions, Session,
};

/// A fitted user browsing model.
#[derive(Debug, Clone)]
pub struct Ubm {
    /// `theta[k][d − 1]`: examination of rank k + 1 at distance d from the previous click.
    pub theta: Vec<Vec<f64>>,
    gamma: Attractiveness,
}

impl Ubm {
    /// Fits the model to `sessions` with `iterations` rounds of EM from θ = γ = 0.5, with
    /// `prior` on each pair's attractiveness.
    pub fn fit(sessions: &[Session], iterations: usize, prior: BetaPrior) -> Ubm {
        let n = depth(sessions);
        let impressions = Impressions::of(sessions);
        // θ of (rank k, distance d) at slot k(k+1)/2 + d − 1 (d ≤ k + 1).
        let slot = |k: usize, d: usize| k * (k + 1) / 2 + d - 1;
        let mut theta = vec![0.5; n * (n + 1) / 2];
        let mut gamma = vec![0.5; impressions.pairs.len()];
        for _ in 0..iterations {
            em_step(&impressions, &mut theta, &mut gamma, slot, prior);
        }
        Ubm {
            theta: (0..n)
                .map(|k| (1..=k + 1).map(|d| theta[slot(k, d)]).collect())
                .collect(),
            gamma: impressions.attractiveness(&gamma, 0.5),
        }
    }
}

impl ClickModel for Ubm {
    fn click_probabilities(&self, session: &Session) -> Vec<f64> {
        let theta = |k: usize, d: usize| {
            self.theta
                .get(k)
                .and_then(|row| row.get(d - 1))
                .copied()
                .unwrap_or(super::EPSILON)
        };
        examined_clicks(session, theta, &self.gamma)
    }

    /// Examination before any click (distance = rank).
    fn examination(&self, rank: usize) -> Option<f64> {
        let k = rank.checked_sub(1)?;
        Some(self.theta.get(k).map_or(super::EPSILON, |row| row[k]))
    }

    fn attractiveness(&self, query: &str, doc: &str) -> f64 {
        self.gamma.get(query, doc)
    }

    fn parameters(&self) -> super::Parameters {
        super::Parameters {
            model: "ubm",
            examination: self.theta.clone(),
            continuation: None,
            pairs: self.gamma.pairs(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::pbm::Pbm;
    use super::super::{evaluate, simulate};
    use super::*;

    const THETA: [f64; 5] = [0.9, 0.6, 0.45, 0.3, 0.2];

    fn gamma(q: usize, d: usize) -> f64 {
        0.2 + 0.6 * (((q * 5 + d * 3) % 7) as f64 / 6.0)
    }

    /// On clicks a position-based model generated, the distance to the previous click carries
    /// no information: every θ of a rank is the same up to PBM's common scale, and UBM fits
    /// the data at least as well as PBM (it nests it).
    #[test]
    fn on_position_based_clicks_it_finds_no_distance_effect() {
        let sessions = simulate::pbm(40_000, 10, 8, &THETA, gamma, 3);
        let ubm = Ubm::fit(&sessions, 60, BetaPrior::NONE);
        let pbm = Pbm::fit(&sessions, 60, BetaPrior::NONE);
        let scale = pbm.theta[0] / THETA[0];
        for (k, row) in ubm.theta.iter().enumerate() {
            for (d, &t) in row.iter().enumerate() {
                let truth = THETA[k] * scale;
                assert!(
                    (t - truth).abs() < 0.06,
                    "rank {} distance {}: {t} vs {truth}",
                    k + 1,
                    d + 1
                );
            }
        }
        let (u, p) = (evaluate(&ubm, &sessions), evaluate(&pbm, &sessions));
        assert!(u.log_likelihood >= p.log_likelihood - 1e-9, "{u:?} {p:?}");
    }
}
