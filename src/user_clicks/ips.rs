//! Training sets from clicks, with inverse-propensity weights (SPEC §11, "Inverse propensity
//! scoring"; the weighting is written out in docs/EVALUATION.md, "Learning from clicks").
//!
//! Each clicked document of a query becomes one training group: the query's rows, the clicked
//! one relevant (label 1) and every other row not (label 0), weighted by
//! `Σ_sessions c/θ̂_k` — the document's clicks, each divided by the estimated examination
//! probability of the rank it was clicked at. Why groups of one relevant document: the
//! objectives rankd trains (stable AP, smooth AP, LambdaMART, RankNet) are not additive over
//! relevant documents, so IPS weights cannot be put on documents inside one list; with a
//! single relevant document each group's loss is a function of that document's rank alone
//! (stable AP reduces to a smoothed reciprocal rank, LambdaMART's to one document's DCG
//! gain), and the weighted sum over groups is, in expectation over the clicks,
//! `Σ_d P(click | examined, d) · Δ(rank of d)` — the same loss with the true click
//! relevance in place of the clicks (Joachims, Swaminathan, Schnabel 2017, whose propensity
//! SVM-Rank is this construction with a hinge). Every row of the query, shown or not, is a
//! candidate the model must rank, so every row is in the group.
//!
//! Propensities are estimated from the sessions themselves by the position-based model's EM
//! ([`estimate_propensities`]), relative to rank 1, and clipped from below at
//! `propensity_clip` so that no click weighs more than `1/propensity_clip` (the variance
//! bound of clipped IPS; the clipped weights are counted in [`ClickSet::clipped`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::pbm::Pbm;
use super::regression_em::RegressionEm;
use super::sessions::RowSession;
use super::BetaPrior;
use super::Session;
use crate::error::Invalid;
use crate::rerank::gbdt::train::unbiased::{ClickLists, DEFAULT_BIAS_NORM};
use crate::rerank::{QueryGroup, RankSet};

/// How clicks are weighted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Debias {
    /// Each click divided by its rank's estimated examination probability.
    Ips,
    /// Unbiased LambdaMART (Hu et al. 2019): trees trained on the logged lists, each pair
    /// (clicked, unclicked) divided by position biases of clicks and non-clicks learned
    /// with the model ([`super::pairwise`]).
    Pairwise,
    /// Each click counts 1: the naive baseline, biased towards what the logger ranked high.
    None,
}

/// EM iterations of the propensity estimate: the swapped sessions are few, so the
/// examination parameters move slowly; 100 iterations change the estimate by < 1e-3 on the
/// LETOR example (docs/EVALUATION.md).
pub const PROPENSITY_ITERATIONS: usize = 100;

/// The smallest propensity a click is divided by, unless told otherwise.
pub const DEFAULT_PROPENSITY_CLIP: f64 = 0.01;

/// The click model whose examination probabilities are the propensities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum PropensityModel {
    /// The position-based model, one attractiveness per (query, document) pair.
    Pbm,
    /// Regression EM: attractiveness a logistic function of the training file's features,
    /// shared across pairs (Wang et al. 2018).
    RegressionEm,
}

/// Examination probability per rank (index 0: rank 1), relative to rank 1, from `model`
/// fitted to `sessions` (over `set`'s rows) by EM.
pub fn estimate_propensities(
    sessions: &[RowSession],
    set: &RankSet,
    model: PropensityModel,
    iterations: usize,
) -> Result<Vec<f64>, Invalid> {
    let theta = match model {
        PropensityModel::Pbm => {
            let sessions: Vec<Session> = sessions.iter().map(RowSession::to_session).collect();
            // Maximum likelihood: a prior on attractiveness predicts held-out clicks better
            // but pulls the examination estimates away from the truth (docs/EVALUATION.md,
            // "Click models").
            Pbm::fit(&sessions, iterations, BetaPrior::NONE).theta
        }
        PropensityModel::RegressionEm => RegressionEm::fit(sessions, set, iterations)?.theta,
    };
    let first = theta.first().copied().unwrap_or(1.0);
    Ok(theta.iter().map(|t| t / first).collect())
}

/// A training set built from clicks, and what went into it.
#[derive(Debug, Clone)]
pub struct ClickSet {
    pub set: RankSet,
    /// Clicks on the set's queries.
    pub clicks: usize,
    /// Clicks whose propensity was below the clip.
    pub clipped: usize,
    /// Sessions on the set's queries.
    pub sessions: usize,
    /// With [`Debias::Pairwise`]: the groups' logged lists, which the trees learn from
    /// instead of the labels.
    pub lists: Option<ClickLists>,
}

/// The training groups of `set`'s queries from `sessions` (already checked against the full
/// training file with [`super::sessions::check`]; sessions of queries not in `set` are
/// skipped, which is how a validation split gets its own groups). `propensity[k]` is rank
/// k + 1's examination probability (used by [`Debias::Ips`] only); ranks beyond it take the
/// last value. With [`Debias::Pairwise`] the groups are [`super::pairwise::list_set`]'s.
pub fn click_set(
    set: &RankSet,
    sessions: &[RowSession],
    debias: Debias,
    propensity: &[f64],
    propensity_clip: f64,
) -> Result<ClickSet, Invalid> {
    if !(propensity_clip > 0.0 && propensity_clip <= 1.0) {
        return Err(Invalid(format!(
            "--propensity-clip must be in (0, 1], got {propensity_clip}"
        )));
    }
    if debias == Debias::Pairwise {
        let l = super::pairwise::list_set(set, sessions, DEFAULT_BIAS_NORM)?;
        return Ok(ClickSet {
            set: l.set,
            clicks: l.clicks,
            clipped: 0,
            sessions: l.sessions,
            lists: Some(l.lists),
        });
    }
    let by_qid = set.query_index();
    // (query index, row within the query) → Σ c/θ̂, in a stable order.
    let mut weights: BTreeMap<(usize, usize), f64> = BTreeMap::new();
    // Per query, the rows shown in at least one session.
    let mut shown: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); set.queries.len()];
    let (mut clicks, mut clipped, mut used) = (0, 0, 0);
    for s in sessions {
        let Some(&qi) = by_qid.get(s.qid.as_str()) else {
            continue;
        };
        used += 1;
        shown[qi].extend(s.shown.iter().copied());
        for (k, row) in s.clicked_ranks() {
            clicks += 1;
            let w = match debias {
                Debias::None | Debias::Pairwise => 1.0,
                Debias::Ips => {
                    let p = propensity
                        .get(k)
                        .or(propensity.last())
                        .copied()
                        .unwrap_or(1.0);
                    if p < propensity_clip {
                        clipped += 1;
                    }
                    1.0 / p.max(propensity_clip)
                }
            };
            *weights.entry((qi, row)).or_insert(0.0) += w;
        }
    }
    if weights.is_empty() {
        return Err(Invalid(format!(
            "no click on any of the {} queries: nothing to learn from",
            set.queries.len()
        )));
    }
    let d = set.num_features();
    let mut x = Vec::new();
    let mut labels = Vec::new();
    let mut groups = Vec::with_capacity(weights.len());
    for (&(qi, row), &weight) in &weights {
        let q = &set.queries[qi];
        let start = labels.len();
        for &r in &shown[qi] {
            let at = q.rows.start + r;
            x.extend_from_slice(&set.x[at * d..(at + 1) * d]);
            labels.push(i32::from(r == row));
        }
        groups.push(QueryGroup {
            qid: format!("{}#{row}", q.qid),
            rows: start..labels.len(),
            weight,
        });
    }
    let set = RankSet::new(set.feature_names.clone(), x, labels, groups, None)
        .map_err(|e| Invalid(format!("click training set: {e}")))?;
    Ok(ClickSet {
        set,
        clicks,
        clipped,
        sessions: used,
        lists: None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::semi_synthetic::{simulate, Protocol};
    use super::super::sessions::test_session as session;
    use super::*;

    fn set() -> RankSet {
        RankSet::new(
            vec!["f1".into(), "f2".into()],
            (0..10).map(|v| v as f32).collect(),
            vec![0, 0, 0, 0, 0],
            vec![QueryGroup::new("a", 0..3), QueryGroup::new("b", 3..5)],
            None,
        )
        .unwrap()
    }

    #[test]
    fn each_clicked_document_is_a_group_weighted_by_its_inverse_propensities() {
        let sessions = [
            session("a", &[2, 0, 1], &[0]),    // row 0 at rank 2
            session("a", &[0, 2, 1], &[0, 1]), // row 0 at rank 1, row 1 at rank 3
            session("b", &[1, 0], &[]),
            session("z", &[0], &[0]), // another split's query
        ];
        let propensity = [1.0, 0.5, 0.004];
        let c = click_set(&set(), &sessions, Debias::Ips, &propensity, 0.01).unwrap();
        assert_eq!((c.clicks, c.clipped, c.sessions), (3, 1, 3));
        let groups: Vec<(&str, f64, std::ops::Range<usize>)> = c
            .set
            .queries
            .iter()
            .map(|q| (q.qid.as_str(), q.weight, q.rows.clone()))
            .collect();
        // Row 0: 1/0.5 + 1/1; row 1: clipped at 1/0.01.
        assert_eq!(groups, [("a#0", 3.0, 0..3), ("a#1", 100.0, 3..6)]);
        assert_eq!(c.set.labels, [1, 0, 0, 0, 1, 0]);
        // Every row of the query, features as in the file.
        assert_eq!(c.set.x[..6], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(c.set.x[6..], c.set.x[..6]);

        let naive = click_set(&set(), &sessions, Debias::None, &[], 0.01).unwrap();
        let w: Vec<f64> = naive.set.queries.iter().map(|q| q.weight).collect();
        assert_eq!(w, [2.0, 1.0]);
    }

    #[test]
    fn no_click_or_a_bad_clip_is_an_error() {
        let sessions = [session("a", &[0, 1], &[])];
        let e = click_set(&set(), &sessions, Debias::Ips, &[1.0], 0.01)
            .unwrap_err()
            .0;
        assert!(e.contains("no click"), "{e}");
        let e = click_set(&set(), &sessions, Debias::Ips, &[1.0], 0.0)
            .unwrap_err()
            .0;
        assert!(e.contains("--propensity-clip"), "{e}");
    }

    /// The protocol's position bias is recovered from its own sessions, swaps included.
    #[test]
    fn propensities_estimated_from_swapped_sessions_match_the_truth() {
        let n = 40;
        let labels: Vec<i32> = (0..n * 10).map(|i| ((i * 7 + i / 10) % 5) as i32).collect();
        let groups = (0..n).map(|q| QueryGroup::new(format!("q{q}"), q * 10..q * 10 + 10));
        let set = RankSet::new(
            vec!["f1".into()],
            vec![0.0; n * 10],
            labels,
            groups.collect(),
            None,
        )
        .unwrap();
        let scores: Vec<f32> = (0..n * 10).map(|i| ((i * 13) % 10) as f32).collect();
        let protocol = Protocol {
            sessions: 60_000,
            swap_share: 0.2,
            ..Protocol::default()
        };
        let sessions = simulate(&protocol, &set, &scores).unwrap();
        let got =
            estimate_propensities(&sessions, &set, PropensityModel::Pbm, PROPENSITY_ITERATIONS)
                .unwrap();
        for (k, p) in got.iter().enumerate() {
            let truth = protocol.examination(k + 1);
            assert!((p - truth).abs() < 0.05, "rank {}: {p} vs {truth}", k + 1);
        }
    }
}
