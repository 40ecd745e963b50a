//! Simulated users for measuring interleaving: how many impressions the sign test needs to
//! prefer the better of two rankers, and how often it prefers one of two identical rankers
//! (an A/A test: at level alpha, about alpha of the runs).
//!
//! Users follow the position-based click model (PBM; Craswell et al. 2008, as in issue 32's
//! semi-synthetic test): the document at rank r is examined with probability `(1/r)^η` and,
//! examined, clicked with a probability that grows with its judged grade,
//! `ε⁻ + (ε⁺ − ε⁻)·(2^g − 1)/(2^g_max − 1)` (unjudged documents count as grade 0). Each
//! impression draws a judged query uniformly, interleaves the two rankers' lists of it with
//! [`super::team_draft`] under a fresh seed, clicks, and credits ([`super::credit`]).

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{credit, team_draft, Tally, Team};

/// One judged query as the two rankers rank it.
#[derive(Debug, Clone)]
pub struct JudgedRankings {
    /// The active ranker's list, best first (team A).
    pub a: Vec<String>,
    /// The candidate's list, best first (team B).
    pub b: Vec<String>,
    /// Judged grades; a document absent is grade 0.
    pub grades: HashMap<String, i32>,
}

/// The position-based click model of the simulated users.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClickModel {
    /// Examination at rank r: `(1/r)^eta`.
    pub eta: f64,
    /// Click probability of an examined document of grade 0.
    pub eps_minus: f64,
    /// Click probability of an examined document of the highest grade.
    pub eps_plus: f64,
    /// The highest grade of the judgments (at least 1).
    pub max_grade: i32,
}

impl ClickModel {
    /// The semi-synthetic setting: η = 1, ε⁻ = 0.1, ε⁺ = 1.0.
    pub fn pbm(max_grade: i32) -> ClickModel {
        ClickModel {
            eta: 1.0,
            eps_minus: 0.1,
            eps_plus: 1.0,
            max_grade: max_grade.max(1),
        }
    }

    /// The probability that the document of `grade` at 1-based `rank` is clicked.
    pub fn click_probability(&self, grade: i32, rank: usize) -> f64 {
        let g = grade.clamp(0, self.max_grade);
        let gain = (2f64.powi(g) - 1.0) / (2f64.powi(self.max_grade) - 1.0);
        let attractive = self.eps_minus + (self.eps_plus - self.eps_minus) * gain;
        (1.0 / rank as f64).powf(self.eta) * attractive
    }
}

/// One simulated experiment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Run {
    /// The counts after every impression.
    pub tally: Tally,
    /// The sign test's p-value after the last impression.
    pub p_value: f64,
    /// The first impression after which the p-value fell below alpha, if one did.
    pub first_significant: Option<u64>,
    /// The first impression after which the always-valid p-value
    /// ([`super::always_valid_p`]) fell below alpha, if one did.
    pub first_sequential: Option<u64>,
    /// Which team the last decision favoured (the one with more wins), if any.
    pub leader: Option<Team>,
}

/// How long a simulated experiment runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Horizon {
    /// Impressions at most.
    pub impressions: u64,
    /// Stop once both the sign test's and the always-valid p-value have fallen below alpha
    /// (how long a decision takes); otherwise run all `impressions` (a fixed-horizon test, as
    /// an A/A test needs).
    pub until_significant: bool,
}

/// Simulates impressions of `page` results each over `queries` with the users of `users`,
/// from `seed`, for `horizon`.
pub fn run(
    queries: &[JudgedRankings],
    users: &ClickModel,
    page: usize,
    horizon: Horizon,
    alpha: f64,
    seed: u64,
) -> Run {
    assert!(!queries.is_empty(), "no judged query to simulate");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut tally = Tally::default();
    let mut first_significant = None;
    let mut first_sequential = None;
    let mut teams = Vec::with_capacity(page);
    let mut clicked = Vec::with_capacity(page);
    for i in 1..=horizon.impressions {
        let q = &queries[rng.random_range(0..queries.len())];
        let a: Vec<&str> = q.a.iter().map(String::as_str).collect();
        let b: Vec<&str> = q.b.iter().map(String::as_str).collect();
        let shown = team_draft(&a, &b, page, rng.random());
        teams.clear();
        clicked.clear();
        for (rank, (doc, team)) in shown.iter().enumerate() {
            let grade = q.grades.get(*doc).copied().unwrap_or(0);
            teams.push(*team);
            clicked.push(rng.random_bool(users.click_probability(grade, rank + 1)));
        }
        let before = (tally.wins_a, tally.wins_b);
        tally.add(credit(&teams, &clicked));
        let decided = (tally.wins_a, tally.wins_b) != before;
        if first_significant.is_none() && decided && tally.p_value() < alpha {
            first_significant = Some(i);
        }
        if first_sequential.is_none() && decided && tally.sequential_p_value() < alpha {
            first_sequential = Some(i);
        }
        if horizon.until_significant && first_significant.is_some() && first_sequential.is_some() {
            break;
        }
    }
    let leader = match tally.wins_a.cmp(&tally.wins_b) {
        std::cmp::Ordering::Greater => Some(Team::A),
        std::cmp::Ordering::Less => Some(Team::B),
        std::cmp::Ordering::Equal => None,
    };
    Run {
        p_value: tally.p_value(),
        tally,
        first_significant,
        first_sequential,
        leader,
    }
}

/// The median of `values` (the mean of the middle two for an even count); `None` if empty.
pub fn median(values: &mut [u64]) -> Option<f64> {
    values.sort_unstable();
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2] as f64),
        _ => Some((values[n / 2 - 1] + values[n / 2]) as f64 / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten queries of 20 documents, three relevant each; `good` ranks them first, `bad` last.
    fn queries() -> (Vec<JudgedRankings>, Vec<JudgedRankings>) {
        let mut ab = Vec::new();
        let mut aa = Vec::new();
        for q in 0..10 {
            let docs: Vec<String> = (0..20).map(|d| format!("q{q}d{d}")).collect();
            let grades: HashMap<String, i32> = docs[..3].iter().map(|d| (d.clone(), 1)).collect();
            let bad: Vec<String> = docs.iter().rev().cloned().collect();
            ab.push(JudgedRankings {
                a: bad.clone(),
                b: docs.clone(),
                grades: grades.clone(),
            });
            aa.push(JudgedRankings {
                a: docs.clone(),
                b: docs,
                grades,
            });
        }
        (ab, aa)
    }

    #[test]
    fn click_probabilities() {
        let m = ClickModel::pbm(2);
        assert!((m.click_probability(0, 1) - 0.1).abs() < 1e-12);
        assert!((m.click_probability(2, 1) - 1.0).abs() < 1e-12);
        assert!((m.click_probability(1, 2) - 0.5 * (0.1 + 0.9 / 3.0)).abs() < 1e-12);
    }

    #[test]
    fn the_better_ranker_wins_and_identical_ones_rarely_differ() {
        let (ab, aa) = queries();
        let users = ClickModel::pbm(1);
        let fixed = |impressions| Horizon {
            impressions,
            until_significant: false,
        };
        let r = run(&ab, &users, 10, fixed(500), 0.05, 1);
        assert_eq!(r.leader, Some(Team::B), "{r:?}");
        assert!(r.first_significant.is_some_and(|n| n < 200), "{r:?}");
        let until = Horizon {
            impressions: 500,
            until_significant: true,
        };
        let early = run(&ab, &users, 10, until, 0.05, 1);
        assert_eq!(early.first_significant, r.first_significant);
        assert_eq!(
            early.tally.impressions,
            r.first_sequential
                .unwrap()
                .max(r.first_significant.unwrap())
        );
        // Identical rankers: team draft shows the same list, split between the teams by
        // coin; the false-positive rate over 200 runs stays near alpha.
        let rejected = (0..200)
            .filter(|&s| run(&aa, &users, 10, fixed(200), 0.05, s).p_value < 0.05)
            .count();
        assert!(rejected <= 20, "{rejected} of 200 A/A runs rejected");
    }

    #[test]
    fn medians() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [3, 1, 2]), Some(2.0));
        assert_eq!(median(&mut [4, 1, 2, 3]), Some(2.5));
    }
}
