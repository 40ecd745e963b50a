//! The semi-synthetic protocol of unbiased learning to rank (SPEC §11): sessions drawn from a
//! LETOR file's expert labels, as if users had clicked on a logging ranker's results.
//!
//! A session picks a training query uniformly, shows the logging ranker's top `top` rows
//! (ties in row order), and draws clicks:
//! - [`Behaviour::Pbm`]: rank k is examined with probability `θ_k = (1/k)^η`, independently;
//!   an examined row of grade y is clicked with probability
//!   `ε⁻ + (ε⁺ − ε⁻)(2^y − 1)/(2^{y_max} − 1)` (y_max the largest grade in the file);
//! - [`Behaviour::Cascade`]: the user examines from the top, clicks an examined row with the
//!   same probability, and stops at the first click.
//!
//! A share of sessions (`swap_share`) are randomised swaps (Joachims et al. 2017's RandPair):
//! the rows at rank 1 and at a uniformly drawn rank k ≥ 2 trade places. A logging ranker that
//! always shows a query's rows in the same order gives a click model nothing to tell
//! examination from attractiveness by (each row is only ever seen at one rank); the swaps are
//! the intervention a live system makes on a small share of its traffic so that position bias
//! can be estimated from its own logs. The session records what was shown, so nothing
//! downstream needs to know which sessions were swapped.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::sessions::RowSession;
use crate::error::Invalid;
use crate::rerank::RankSet;

/// How simulated users examine and click.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Behaviour {
    Pbm,
    Cascade,
}

/// The protocol's parameters (SPEC §11's defaults in [`Protocol::default`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Protocol {
    pub sessions: usize,
    pub behaviour: Behaviour,
    /// Position-bias strength: `θ_k = (1/k)^η`.
    pub eta: f64,
    /// Click probability of an examined row of grade 0.
    pub eps_minus: f64,
    /// Click probability of an examined row of the highest grade.
    pub eps_plus: f64,
    /// Rows shown per session.
    pub top: usize,
    /// Share of sessions whose ranks 1 and k ≥ 2 are swapped.
    pub swap_share: f64,
    pub seed: u64,
}

impl Default for Protocol {
    fn default() -> Protocol {
        Protocol {
            sessions: 100_000,
            behaviour: Behaviour::Pbm,
            eta: 1.0,
            eps_minus: 0.1,
            eps_plus: 1.0,
            top: 10,
            swap_share: 0.1,
            seed: 1,
        }
    }
}

impl Protocol {
    pub fn validate(&self) -> Result<(), Invalid> {
        let probability = |name: &str, v: f64| {
            if (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(Invalid(format!("{name} must be in [0, 1], got {v}")))
            }
        };
        probability("--eps-minus", self.eps_minus)?;
        probability("--eps-plus", self.eps_plus)?;
        probability("--swap-share", self.swap_share)?;
        if self.eps_minus > self.eps_plus {
            return Err(Invalid(format!(
                "--eps-minus ({}) must not exceed --eps-plus ({})",
                self.eps_minus, self.eps_plus
            )));
        }
        if !(self.eta.is_finite() && self.eta >= 0.0) {
            return Err(Invalid(format!(
                "--eta must be a finite number ≥ 0, got {}",
                self.eta
            )));
        }
        if self.sessions == 0 || self.top == 0 {
            return Err(Invalid("--sessions and --top must be at least 1".into()));
        }
        Ok(())
    }

    /// `θ_k`, the probability that rank `k` (1-based) is examined under [`Behaviour::Pbm`].
    pub fn examination(&self, rank: usize) -> f64 {
        (1.0 / rank as f64).powf(self.eta)
    }

    /// The probability that an examined row of grade `y` is clicked, `y_max` the highest grade.
    pub fn click_given_examined(&self, y: i32, y_max: i32) -> f64 {
        if y_max <= 0 {
            return self.eps_minus;
        }
        let y = y.clamp(0, y_max);
        let relevance = (2f64.powi(y) - 1.0) / (2f64.powi(y_max) - 1.0);
        self.eps_minus + (self.eps_plus - self.eps_minus) * relevance
    }
}

/// Draws `protocol.sessions` sessions over `set`'s queries, shown in the order of
/// `logging_scores` (one per row of `set`).
pub fn simulate(
    protocol: &Protocol,
    set: &RankSet,
    logging_scores: &[f32],
) -> Result<Vec<RowSession>, Invalid> {
    protocol.validate()?;
    if logging_scores.len() != set.num_rows() {
        return Err(Invalid(format!(
            "{} logging scores for {} rows",
            logging_scores.len(),
            set.num_rows()
        )));
    }
    if set.queries.is_empty() {
        return Err(Invalid("the training file has no query".into()));
    }
    let y_max = set.labels.iter().copied().max().unwrap_or(0);
    // Each query's logged order, computed once.
    let orders: Vec<Vec<usize>> = set
        .queries
        .iter()
        .map(|q| {
            let scores = &logging_scores[q.rows.clone()];
            let mut order: Vec<usize> = (0..q.rows.len()).collect();
            order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
            order.truncate(protocol.top);
            order
        })
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(protocol.seed);
    let mut sessions = Vec::with_capacity(protocol.sessions);
    for _ in 0..protocol.sessions {
        let qi = rng.random_range(0..set.queries.len());
        let q = &set.queries[qi];
        let mut shown = orders[qi].clone();
        if shown.len() > 1 && rng.random::<f64>() < protocol.swap_share {
            let k = rng.random_range(1..shown.len());
            shown.swap(0, k);
        }
        let mut clicks = Vec::new();
        for (k, &row) in shown.iter().enumerate() {
            let examined = match protocol.behaviour {
                Behaviour::Pbm => rng.random::<f64>() < protocol.examination(k + 1),
                Behaviour::Cascade => true,
            };
            let grade = set.labels[q.rows.start + row];
            let clicked =
                examined && rng.random::<f64>() < protocol.click_given_examined(grade, y_max);
            if clicked {
                clicks.push(row);
                if protocol.behaviour == Behaviour::Cascade {
                    break;
                }
            }
        }
        sessions.push(RowSession {
            qid: q.qid.clone(),
            shown,
            clicks,
        });
    }
    Ok(sessions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rerank::QueryGroup;

    /// One query of 10 rows, grades 4, 3, ..., and a logging ranker that reverses them.
    fn set() -> (RankSet, Vec<f32>) {
        let labels = vec![4, 0, 3, 0, 2, 0, 1, 0, 0, 0];
        let set = RankSet::new(
            vec!["f1".into()],
            vec![0.0; 10],
            labels,
            vec![QueryGroup::new("q", 0..10)],
            None,
        )
        .unwrap();
        let scores = (0..10).map(|r| r as f32).collect();
        (set, scores)
    }

    #[test]
    fn click_rates_per_rank_follow_the_protocol() {
        let (set, scores) = set();
        let protocol = Protocol {
            sessions: 200_000,
            eta: 2.0,
            swap_share: 0.0,
            ..Protocol::default()
        };
        let sessions = simulate(&protocol, &set, &scores).unwrap();
        // The logging order is rows 9, 8, ..., 0 in every session.
        assert!(sessions
            .iter()
            .all(|s| s.shown == [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]));
        for (k, row) in (0..10).rev().enumerate() {
            let clicks = sessions.iter().filter(|s| s.clicks.contains(&row)).count();
            let rate = clicks as f64 / sessions.len() as f64;
            let want =
                protocol.examination(k + 1) * protocol.click_given_examined(set.labels[row], 4);
            let sd = (want * (1.0 - want) / sessions.len() as f64).sqrt();
            assert!(
                (rate - want).abs() < 5.0 * sd + 1e-4,
                "rank {}: {rate} vs {want}",
                k + 1
            );
        }
    }

    #[test]
    fn the_click_probability_spans_eps_minus_to_eps_plus() {
        let p = Protocol::default();
        assert_eq!(p.click_given_examined(0, 4), 0.1);
        assert_eq!(p.click_given_examined(4, 4), 1.0);
        assert!((p.click_given_examined(2, 4) - (0.1 + 0.9 * 3.0 / 15.0)).abs() < 1e-12);
        assert_eq!(p.examination(4), 0.25);
    }

    #[test]
    fn the_cascade_stops_at_the_first_click_and_swaps_move_rank_one() {
        let (set, scores) = set();
        let protocol = Protocol {
            sessions: 5_000,
            behaviour: Behaviour::Cascade,
            swap_share: 0.5,
            ..Protocol::default()
        };
        let sessions = simulate(&protocol, &set, &scores).unwrap();
        assert!(sessions.iter().all(|s| s.clicks.len() <= 1));
        let swapped = sessions.iter().filter(|s| s.shown[0] != 9).count();
        let share = swapped as f64 / sessions.len() as f64;
        assert!((share - 0.5).abs() < 0.03, "{share}");
        // Same seed, same sessions.
        assert_eq!(simulate(&protocol, &set, &scores).unwrap(), sessions);
    }

    #[test]
    fn bad_parameters_are_refused() {
        let (set, scores) = set();
        for (bad, want) in [
            (
                Protocol {
                    eps_minus: 1.5,
                    ..Protocol::default()
                },
                "--eps-minus",
            ),
            (
                Protocol {
                    eps_minus: 0.9,
                    eps_plus: 0.5,
                    ..Protocol::default()
                },
                "must not exceed",
            ),
            (
                Protocol {
                    eta: f64::NAN,
                    ..Protocol::default()
                },
                "--eta",
            ),
            (
                Protocol {
                    sessions: 0,
                    ..Protocol::default()
                },
                "--sessions",
            ),
        ] {
            let e = simulate(&bad, &set, &scores).unwrap_err().0;
            assert!(e.contains(want), "{e}");
        }
        assert!(simulate(&Protocol::default(), &set, &scores[..3]).is_err());
    }
}
