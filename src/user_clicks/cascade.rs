//! The cascade model (SPEC §11): the user scans the list from the top, clicks the first
//! attractive document and leaves. `P(c_k = 1) = γ_k Π_{j<k}(1 − γ_j)`.
//!
//! Its maximum-likelihood fit is closed-form: a pair's attractiveness is its clicks over its
//! impressions at or above the session's first click. What lies below the first click was not
//! examined, and further clicks are outside the model (as in PyClick, they are ignored).

use std::collections::HashMap;

use super::{Attractiveness, BetaPrior, ClickModel, Pair, Session};

/// A fitted cascade model.
#[derive(Debug, Clone)]
pub struct Cascade {
    gamma: Attractiveness,
}

impl Cascade {
    /// Fits the model with `prior` on each pair's attractiveness.
    pub fn fit(sessions: &[Session], prior: BetaPrior) -> Cascade {
        let mut counts: HashMap<Pair, (usize, usize)> = HashMap::new();
        for s in sessions {
            let seen = s
                .clicks
                .iter()
                .position(|&c| c)
                .map_or(s.shown.len(), |k| k + 1);
            for (doc, &clicked) in s.shown.iter().zip(&s.clicks).take(seen) {
                let c = counts.entry((s.query.clone(), doc.clone())).or_default();
                c.0 += usize::from(clicked);
                c.1 += 1;
            }
        }
        Cascade {
            gamma: Attractiveness {
                by_pair: counts
                    .into_iter()
                    .map(|(pair, (clicks, n))| (pair, prior.estimate(clicks as f64, n)))
                    .collect(),
                prior: 0.5,
            },
        }
    }
}

impl ClickModel for Cascade {
    /// Below the first click the model predicts no click: a further click it cannot explain
    /// gets probability ε (and no click 1 − ε), so a log-likelihood stays finite.
    fn click_probabilities(&self, session: &Session) -> Vec<f64> {
        let mut clicked_above = false;
        session
            .shown
            .iter()
            .zip(&session.clicks)
            .map(|(doc, &clicked)| {
                let p = if clicked_above {
                    super::EPSILON
                } else {
                    self.attractiveness(&session.query, doc)
                };
                clicked_above |= clicked;
                super::observed(p, clicked)
            })
            .collect()
    }

    /// Rank 1 is always examined; below, reaching a rank depends on the documents above.
    fn examination(&self, rank: usize) -> Option<f64> {
        (rank <= 1).then_some(1.0)
    }

    fn attractiveness(&self, query: &str, doc: &str) -> f64 {
        self.gamma.get(query, doc)
    }

    fn parameters(&self) -> super::Parameters {
        super::Parameters {
            model: "cascade",
            examination: Vec::new(),
            continuation: None,
            pairs: self.gamma.pairs(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(shown: &[&str], clicks: &[bool]) -> Session {
        Session {
            query: "q".into(),
            shown: shown.iter().map(|s| s.to_string()).collect(),
            clicks: clicks.to_vec(),
        }
    }

    /// Counted by hand: `a` is seen 3 times, clicked once; `b` seen twice, clicked once; `c`
    /// and `d` seen once each above any click (not below), never clicked; `e` only ever
    /// below a click: never examined.
    #[test]
    fn attractiveness_counts_impressions_down_to_the_first_click() {
        let sessions = [
            session(&["a", "b", "c"], &[false, true, false]),
            session(&["a", "e"], &[true, true]),
            session(&["b", "a", "c", "d"], &[false, false, false, false]),
        ];
        let m = Cascade::fit(&sessions, BetaPrior::NONE);
        assert!((m.attractiveness("q", "a") - 1.0 / 3.0).abs() < 1e-12);
        assert!((m.attractiveness("q", "b") - 0.5).abs() < 1e-12);
        assert!((m.attractiveness("q", "c") - 1e-6).abs() < 1e-12);
        assert!((m.attractiveness("q", "d") - 1e-6).abs() < 1e-12);
        assert_eq!(
            m.attractiveness("q", "e"),
            0.5,
            "e is below a click only: the prior"
        );
        // The likelihood of the first session: a not clicked, b clicked, then nothing.
        let p = m.click_probabilities(&sessions[0]);
        assert!((p[0] - 2.0 / 3.0).abs() < 1e-12 && (p[1] - 0.5).abs() < 1e-12);
        assert_eq!(p[2], 1.0 - 1e-6);
    }
}
