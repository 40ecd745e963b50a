//! Online comparison of two rankers by team-draft interleaving (Radlinski, Kurup & Joachims,
//! "How does clickthrough data reflect retrieval quality?", CIKM 2008).
//!
//! For a sampled share of searches the server ranks the same first-phase window with the
//! active reranker (team [`Team::A`]) and with a candidate (team [`Team::B`]), and shows one
//! list drafted from both ([`team_draft`]): in each round a fair coin says which team picks
//! first, and each team adds its highest-ranked document not yet shown. The impression keeps
//! each shown document's team; the clicks `POST /events` stores then credit the teams
//! ([`credit`]: the team with more clicked documents wins the impression, equal counts tie),
//! and the two-sided sign test ([`sign_test`]) over the impressions one team won says
//! whether the candidate is better, worse, or not distinguishable yet ([`Tally::decision`]).
//! Read once, at a sample size fixed in advance, its error rate is alpha; watched after every
//! impression it is not, so what acts on the counts as they come (promotion on win) uses the
//! always-valid p-value of a mixture sequential test instead ([`always_valid_p`],
//! [`Tally::sequential_decision`]).
//!
//! Everything random is a function of the query id ([`seed_of`]), so an interleaved answer
//! can be recomputed from its impression, and a retried request with the same id draws the
//! same list. Which searches are interleaved ([`sampled`]) is a function of the id too.
//!
//! - `sign_test.rs`: the exact two-sided binomial test.
//! - `simulate.rs`: simulated users (a position-based click model over judged queries) for
//!   measuring how many impressions a decision takes, and how often an A/A test errs.
//! - The experiments' rows and their counts live in `crate::db::experiments`; the HTTP
//!   endpoints in `crate::api::admin::experiments`.

mod sign_test;
pub mod simulate;

use std::collections::HashSet;
use std::hash::Hash;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub use sign_test::{always_valid_p, sign_test};

/// Which ranker contributed a shown document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Team {
    /// The active ranking.
    A,
    /// The candidate.
    B,
}

impl Team {
    pub fn as_str(self) -> &'static str {
        match self {
            Team::A => "A",
            Team::B => "B",
        }
    }

    pub fn parse(s: &str) -> Option<Team> {
        match s {
            "A" => Some(Team::A),
            "B" => Some(Team::B),
            _ => None,
        }
    }
}

/// Team-draft interleaving of rankings `a` and `b` (best first) into at most `len`
/// documents, each with the team that picked it; the coin flips come from `seed`.
///
/// Radlinski et al. 2008, Algorithm 2: while both rankings have a document not yet picked,
/// the team with fewer picks so far picks next (a fair coin decides between equals), taking
/// its highest-ranked document not yet in the list. When one ranking is used up, the other
/// fills the rest alone (the original stops there; the rankings compared here hold the same
/// window, so they run out together).
pub fn team_draft<T: Copy + Eq + Hash>(a: &[T], b: &[T], len: usize, seed: u64) -> Vec<(T, Team)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    team_draft_with(a, b, len, || rng.random::<bool>())
}

/// [`team_draft`] with the coin given: `coin()` true means team A picks first in a round
/// where both teams have picked equally often.
fn team_draft_with<T: Copy + Eq + Hash>(
    a: &[T],
    b: &[T],
    len: usize,
    mut coin: impl FnMut() -> bool,
) -> Vec<(T, Team)> {
    let mut shown: Vec<(T, Team)> = Vec::with_capacity(len.min(a.len() + b.len()));
    let mut taken: HashSet<T> = HashSet::with_capacity(shown.capacity());
    let (mut ia, mut ib) = (0, 0);
    let (mut picks_a, mut picks_b) = (0usize, 0usize);
    let next = |list: &[T], i: &mut usize, taken: &HashSet<T>| -> Option<T> {
        while *i < list.len() && taken.contains(&list[*i]) {
            *i += 1;
        }
        list.get(*i).copied()
    };
    while shown.len() < len {
        let (da, db) = (next(a, &mut ia, &taken), next(b, &mut ib, &taken));
        let team = match (da, db) {
            (None, None) => break,
            (Some(_), None) => Team::A,
            (None, Some(_)) => Team::B,
            (Some(_), Some(_)) => {
                if picks_a < picks_b || (picks_a == picks_b && coin()) {
                    Team::A
                } else {
                    Team::B
                }
            }
        };
        let doc = match team {
            Team::A => {
                picks_a += 1;
                da
            }
            Team::B => {
                picks_b += 1;
                db
            }
        }
        .expect("the picking team has a document");
        taken.insert(doc);
        shown.push((doc, team));
    }
    shown
}

/// What one impression's clicks say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// No shown document was clicked: the impression says nothing.
    NoClick,
    /// Clicks, as many on each team's documents.
    Tie,
    Won(Team),
}

/// Credits an impression: `teams[i]` is the team of the i-th shown document, `clicked[i]`
/// whether it was clicked. The team with more clicked documents wins (Radlinski et al. 2008,
/// §5); a document clicked twice counts once.
pub fn credit(teams: &[Team], clicked: &[bool]) -> Outcome {
    let (mut a, mut b) = (0usize, 0usize);
    for (team, _) in teams.iter().zip(clicked).filter(|(_, &c)| c) {
        match team {
            Team::A => a += 1,
            Team::B => b += 1,
        }
    }
    match (a, b) {
        (0, 0) => Outcome::NoClick,
        _ if a == b => Outcome::Tie,
        _ if a > b => Outcome::Won(Team::A),
        _ => Outcome::Won(Team::B),
    }
}

/// An experiment's impressions and what their clicks said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Interleaved impressions logged.
    pub impressions: u64,
    /// Impressions with at least one click on a shown document.
    pub clicked: u64,
    pub wins_a: u64,
    pub wins_b: u64,
    /// Clicked impressions whose teams had as many clicks each.
    pub ties: u64,
}

/// What an experiment's counts decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Fewer impressions than the experiment's `min_impressions`: no verdict yet.
    Collecting,
    /// The candidate (team B) won significantly more impressions (p < alpha).
    CandidateWins,
    /// The active ranking (team A) won significantly more impressions (p < alpha).
    ActiveWins,
    /// Enough impressions, but the sign test does not reject equality (p ≥ alpha).
    NoDifferenceYet,
}

impl Tally {
    pub fn add(&mut self, outcome: Outcome) {
        self.impressions += 1;
        match outcome {
            Outcome::NoClick => {}
            Outcome::Tie => {
                self.clicked += 1;
                self.ties += 1;
            }
            Outcome::Won(team) => {
                self.clicked += 1;
                match team {
                    Team::A => self.wins_a += 1,
                    Team::B => self.wins_b += 1,
                }
            }
        }
    }

    /// The sign test's two-sided p-value over the impressions one team won (ties and
    /// unclicked impressions carry no sign).
    pub fn p_value(&self) -> f64 {
        sign_test(self.wins_a, self.wins_b)
    }

    /// The always-valid p-value of the same counts ([`always_valid_p`]): what may be
    /// watched after every impression, as promotion does.
    pub fn sequential_p_value(&self) -> f64 {
        always_valid_p(self.wins_a, self.wins_b)
    }

    /// The verdict at significance level `alpha` once `min_impressions` are logged, by the
    /// fixed-horizon sign test: read it once, at a sample size planned in advance.
    pub fn decision(&self, alpha: f64, min_impressions: u64) -> Decision {
        self.verdict(self.p_value(), alpha, min_impressions)
    }

    /// The verdict of the always-valid test: safe to act on at whatever impression it is
    /// first reached (promotion on win).
    pub fn sequential_decision(&self, alpha: f64, min_impressions: u64) -> Decision {
        self.verdict(self.sequential_p_value(), alpha, min_impressions)
    }

    fn verdict(&self, p: f64, alpha: f64, min_impressions: u64) -> Decision {
        if self.impressions < min_impressions {
            Decision::Collecting
        } else if p < alpha {
            if self.wins_b > self.wins_a {
                Decision::CandidateWins
            } else {
                Decision::ActiveWins
            }
        } else {
            Decision::NoDifferenceYet
        }
    }
}

/// The seed of an interleaving drawn for query id `query_id`: FNV-1a of its bytes, mixed by
/// SplitMix64's finaliser so that ids differing in one character give unrelated coins.
pub fn seed_of(query_id: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in query_id.as_bytes() {
        h ^= u64::from(byte);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    splitmix64(h)
}

pub(crate) fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Whether the search with id `query_id` belongs to the interleaved `share` (0 < share ≤ 1)
/// of the traffic: a uniform number drawn from the id (independent of [`seed_of`]'s coins)
/// below `share`.
pub fn sampled(query_id: &str, share: f64) -> bool {
    // 53 bits: the uniform doubles in [0, 1).
    let u = (splitmix64(seed_of(query_id)) >> 11) as f64 / (1u64 << 53) as f64;
    u < share
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn team_draft_by_hand() {
        let a = ["a", "b", "c", "d"];
        let b = ["b", "e", "a", "f"];
        // Round 1: A first, picks a; B picks b. Round 2: B first, picks e; A picks c.
        // Round 3: A first, picks d; B's next unshown document is f.
        let mut coins = [true, false, true].into_iter();
        let shown = team_draft_with(&a, &b, 6, || coins.next().unwrap());
        use Team::*;
        assert_eq!(
            shown,
            [("a", A), ("b", B), ("e", B), ("c", A), ("d", A), ("f", B)]
        );
    }

    #[test]
    fn team_draft_fills_from_the_longer_list_and_stops_at_len() {
        let shown = team_draft_with(&[1, 2], &[2, 3, 4, 5], 10, || true);
        assert_eq!(
            shown,
            vec![
                (1, Team::A),
                (2, Team::B),
                (3, Team::B),
                (4, Team::B),
                (5, Team::B)
            ]
        );
        assert_eq!(team_draft(&[1, 2, 3], &[3, 2, 1], 2, 7).len(), 2);
        // Deterministic given the seed.
        let a: Vec<u32> = (0..50).collect();
        let b: Vec<u32> = (0..50).rev().collect();
        assert_eq!(team_draft(&a, &b, 20, 99), team_draft(&a, &b, 20, 99));
    }

    /// Every document of both rankings' common window is shown exactly once, and the teams'
    /// sizes differ by at most one at every prefix.
    #[test]
    fn team_draft_shows_each_document_once_with_balanced_teams() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for seed in 0..200u64 {
            let n = rng.random_range(1..30usize);
            let a: Vec<usize> = (0..n).collect();
            let mut b = a.clone();
            rand::seq::SliceRandom::shuffle(&mut b[..], &mut rng);
            let shown = team_draft(&a, &b, n, seed);
            let mut ids: Vec<usize> = shown.iter().map(|&(d, _)| d).collect();
            ids.sort_unstable();
            assert_eq!(ids, a);
            let mut diff = 0i64;
            for &(_, t) in &shown {
                diff += if t == Team::A { 1 } else { -1 };
                assert!(diff.abs() <= 1, "{shown:?}");
            }
        }
    }

    /// Fairness, by brute force: over every sequence of coins, each position of the shown
    /// list belongs to team A exactly half of the time, whatever the two rankings are; so a
    /// clicker that ignores the documents (clicks by position alone) favours neither team.
    #[test]
    fn each_position_is_a_coin_flip_over_all_coin_sequences() {
        let a = [0, 1, 2, 3, 4, 5];
        let b = [5, 0, 4, 1, 3, 2];
        let rounds = 3; // six documents: three rounds of two picks
        let mut team_a = [0u32; 6];
        for coins in 0..(1u32 << rounds) {
            let mut k = 0;
            let shown = team_draft_with(&a, &b, 6, || {
                let c = coins >> k & 1 == 1;
                k += 1;
                c
            });
            for (i, &(_, t)) in shown.iter().enumerate() {
                team_a[i] += u32::from(t == Team::A);
            }
        }
        assert_eq!(team_a, [4; 6], "{team_a:?} of {} sequences", 1 << rounds);
    }

    /// Fairness, sampled: a uniformly random clicker over the shown list (each position
    /// clicked with probability 0.3) wins as often for A as for B over many seeds.
    #[test]
    fn a_random_clicker_favours_neither_team() {
        let a: Vec<u32> = (0..10).collect();
        let b: Vec<u32> = vec![9, 3, 0, 7, 1, 8, 2, 6, 4, 5];
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let mut tally = Tally::default();
        for seed in 0..20_000u64 {
            let shown = team_draft(&a, &b, 10, seed);
            let teams: Vec<Team> = shown.iter().map(|&(_, t)| t).collect();
            let clicked: Vec<bool> = (0..10).map(|_| rng.random_bool(0.3)).collect();
            tally.add(credit(&teams, &clicked));
        }
        let decided = (tally.wins_a + tally.wins_b) as f64;
        let share_a = tally.wins_a as f64 / decided;
        // Binomial sd at n ≈ 15 000 is 0.004: five of them.
        assert!((share_a - 0.5).abs() < 0.02, "{tally:?}");
        assert!(tally.p_value() > 0.001, "{tally:?}");
    }

    #[test]
    fn credit_by_hand() {
        use Team::*;
        let teams = [A, B, A, B];
        assert_eq!(credit(&teams, &[false; 4]), Outcome::NoClick);
        assert_eq!(
            credit(&teams, &[true, false, false, false]),
            Outcome::Won(A)
        );
        assert_eq!(credit(&teams, &[true, true, false, false]), Outcome::Tie);
        assert_eq!(credit(&teams, &[false, true, true, true]), Outcome::Won(B));
        let mut t = Tally::default();
        for o in [
            Outcome::NoClick,
            Outcome::Tie,
            Outcome::Won(A),
            Outcome::Won(B),
        ] {
            t.add(o);
        }
        assert_eq!(
            t,
            Tally {
                impressions: 4,
                clicked: 3,
                wins_a: 1,
                wins_b: 1,
                ties: 1
            }
        );
    }

    #[test]
    fn decisions() {
        let t = |wins_a, wins_b| Tally {
            impressions: 100,
            clicked: wins_a + wins_b,
            wins_a,
            wins_b,
            ties: 0,
        };
        assert_eq!(t(0, 10).decision(0.05, 0), Decision::CandidateWins);
        assert_eq!(t(10, 0).decision(0.05, 0), Decision::ActiveWins);
        assert_eq!(t(5, 5).decision(0.05, 0), Decision::NoDifferenceYet);
        assert_eq!(t(0, 10).decision(0.05, 101), Decision::Collecting);
    }

    #[test]
    fn sampling_follows_the_share_and_the_id() {
        let ids: Vec<String> = (0..20_000).map(|i| format!("01J{i:023}")).collect();
        for share in [0.1, 0.5] {
            let n = ids.iter().filter(|id| sampled(id, share)).count() as f64;
            assert!((n / ids.len() as f64 - share).abs() < 0.015, "{share}: {n}");
        }
        assert!(ids.iter().all(|id| sampled(id, 1.0)));
        assert_eq!(sampled("X", 0.5), sampled("X", 0.5));
        assert_ne!(seed_of("01J0"), seed_of("01J1"));
    }
}
