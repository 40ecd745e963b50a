//! Training sets from clicks, with inverse-propensity weights (SPEC §11, "Inverse propensity
//! scoring"; the weighting is written out in docs/EVALUATION.md, "Learning from clicks").
//!
//! **Graded labels** ([`ClickLabels::Graded`], the default): each query with a click becomes
//! one training group of the rows its sessions showed, each labelled with its estimated click
//! rate given examination, `(1/N_q)·Σ_sessions c/θ̂_k` (N_q the query's sessions), in
//! thousandths, and trained by objectives that read only the order of the labels (graded
//! stable AP). Under the position-based model with click noise that rate's expectation is
//! `(n_d/N_q)·(ε⁻ + (ε⁺ − ε⁻)·R)` (n_d the sessions that showed d), increasing in the
//! relevance R wherever a query's pages show the same documents, as a logger that reorders at
//! most its own page does; then with enough sessions the labels are ordered as the relevance
//! and the group is what the full-information model trains on, and the noise floor shifts
//! every rate alike and reorders nothing. A document shown on fewer of its query's pages is
//! rated lower by that share. On the semi-synthetic test graded labels reach 0.948–0.975 of the
//! full-information model at 10⁵ sessions where binary groups stop at 0.92–0.94
//! (docs/EVALUATION.md, "Graded click labels").
//!
//! **Binary groups** ([`ClickLabels::Binary`]): each clicked document of a query becomes one
//! training group: the rows the query's sessions showed, the clicked one relevant (label 1) and
//! every other row not (label 0), weighted by
//! `Σ_sessions c/θ̂_k` — the document's clicks, each divided by the estimated examination
//! probability of the rank it was clicked at. Why groups of one relevant document: the
//! objectives rankd trains (stable AP, smooth AP, LambdaMART, RankNet) are not additive over
//! relevant documents, so IPS weights cannot be put on documents inside one list; with a
//! single relevant document each group's loss is a function of that document's rank alone
//! (stable AP reduces to a smoothed reciprocal rank, LambdaMART's to one document's DCG
//! gain), and the weighted sum over groups is, in expectation over the clicks,
//! `Σ_d P(click | examined, d) · Δ(rank of d)` — the same loss with the true click
//! relevance in place of the clicks (Joachims, Swaminathan, Schnabel 2017, whose propensity
//! SVM-Rank is this construction with a hinge). Binary groups take every objective, and the
//! noise floor below.
//!
//! Propensities are estimated from the sessions themselves by the position-based model's EM
//! ([`estimate_propensities`]), relative to rank 1, and clipped from below at
//! `propensity_clip` so that no click weighs more than `1/propensity_clip` (the variance
//! bound of clipped IPS; the clipped weights are counted in [`ClickSet::clipped`]).
//!
//! **The noise floor (affine correction).** Users click documents they find irrelevant too:
//! under the position-based model with click noise, an examined document is clicked with
//! probability `ε⁻ + (ε⁺ − ε⁻)·R`, so every impression of an irrelevant document earns IPS
//! `ε⁻` in expectation and the floor sits under every weight (grade 1 of the semi-synthetic
//! protocol weighs 0.16 against grade 4's 1, instead of 1/15). Vardasbi, Oosterhuis and de
//! Rijke (2020, "When inverse propensity scoring does not work: affine corrections for
//! unbiased learning to rank") write a click's probability at rank k as `α_k·R + β_k` and
//! correct each impression by `(c − β_k)/α_k`; here `β_k = θ_k·ε⁻`, so with
//! [`NoiseFloor::Estimate`] an impression of d at rank k contributes
//! `(c − θ̂_k·ε̂⁻)/max(θ̂_k, clip)` — `c/θ̂_k − ε̂⁻` above the clip — clicked or not. A
//! document's weight is the sum over its impressions, and a clicked document whose weight comes
//! out ≤ 0 (clicked no more than the floor explains) is left out (counted in
//! [`ClickSet::below_floor`]): the estimate is clipped at 0. The constant `ε⁺ − ε⁻` the paper
//! divides by is not estimated: it scales every group's weight by the same factor, which
//! leaves the groups' relative weights as they are (in the trees, a common factor on the
//! gradients and hessians only moves the leaf regularisation, which the weights of real logs
//! dwarf; docs/EVALUATION.md measures a factor of 10 changing NDCG@10 by < 0.001).
//!
//! `ε̂⁻` is estimated from the sessions, never given: [`estimate_noise_floor`] deconvolves the
//! distribution of attractiveness over the shown (query, document) pairs, on the scale of
//! `c/θ̂` (relative to rank 1), and takes its lower tenth. Why that: the floor is by definition
//! the attractiveness of a document with no relevance, i.e. the bottom of that distribution,
//! and a fitted model's per-pair attractiveness cannot be used directly — its sampling noise
//! (a pair examined 50 times has ± 0.04) spreads the bottom downwards, so a low quantile of the
//! per-pair estimates falls well below the floor (0.07 for a floor of 0.1 at 10⁵ sessions). The
//! nonparametric maximum-likelihood estimate of the mixing distribution (Kiefer and Wolfowitz;
//! EM over the weights of a grid of attractiveness values, each pair's clicks binomial at its
//! ranks' examination) removes that noise. Its 10 % quantile is the floor as long as a tenth
//! of the shown documents are irrelevant; with fewer it lies above the floor. The quantile
//! rather than the lower mode: with few sessions the irrelevant documents' peak merges with
//! the next grade's and the mode moves up, and subtracting too much (a floor of 0.15 for a
//! truth of 0.1) costs more than subtracting too little (docs/EVALUATION.md, "The noise
//! floor"). On the semi-synthetic protocol's logs the estimate is within 0.011 of the truth
//! (docs/EVALUATION.md); in the unit tests within 0.02 of 0 and 0.1, 0.024 below 0.2. The correction measured no better than
//! plain IPS there (−0.004 NDCG@10 on average over the eight rows), so it is not the default.

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

/// Whether IPS subtracts the click-noise floor from every impression (the affine correction;
/// see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum NoiseFloor {
    /// Estimated from the sessions ([`estimate_noise_floor`]) and subtracted per impression.
    Estimate,
    /// Not subtracted: plain IPS.
    None,
}

/// What `--train-clicks`, `rankd train --clicks` and `POST /admin/train` do unless told.
pub const DEFAULT_NOISE_FLOOR: NoiseFloor = NoiseFloor::None;

/// How a query's clicks become training groups (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum ClickLabels {
    /// One group per query: the rows its sessions showed, each labelled with its estimated
    /// click rate given examination, `(1/N_q)·Σ c/θ̂`, in thousandths ([`GRADED_LABEL_SCALE`]);
    /// every group weighs 1. For the objectives that read only the order of the labels.
    Graded,
    /// One group per clicked document: that document relevant, the other shown rows not,
    /// weighted by its `Σ c/θ̂`.
    Binary,
}

/// What `--train-clicks`, `rankd train --clicks` and `POST /admin/train` build unless told:
/// graded, which measured better than binary groups on the semi-synthetic test (0.960 against
/// 0.931 of the full-information model at 10⁵ sessions; docs/EVALUATION.md, "Graded click
/// labels").
pub const DEFAULT_CLICK_LABELS: ClickLabels = ClickLabels::Graded;

/// Graded click labels are estimated click rates times this, rounded: 1000 is a click on
/// every examination. The objectives graded labels train read only their order, so the scale
/// is the resolution at which two rates count as equal.
pub const GRADED_LABEL_SCALE: f64 = 1000.0;

/// The share of the shown documents whose deconvolved attractiveness is taken to be at the
/// noise floor ([`estimate_noise_floor`]).
pub const NOISE_FLOOR_QUANTILE: f64 = 0.1;

/// Grid points of the attractiveness distribution, on `(0, 1]`.
const FLOOR_GRID: usize = 400;

/// EM iterations of the mixing distribution: from uniform weights EM sharpens the
/// distribution with every round; 300 rounds resolve the protocol's grades at 10⁵ sessions
/// and stop short of the spikes the fully converged estimate is made of.
const FLOOR_ITERATIONS: usize = 300;

/// Distinct (query, document) click profiles the floor is estimated from; larger logs are
/// thinned evenly (a quantile needs no more).
const FLOOR_MAX_PAIRS: usize = 20_000;

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

/// The propensity of 0-based rank `k`: ranks beyond the estimate take its last value, and
/// none estimated is 1.
fn at_rank(propensity: &[f64], k: usize) -> f64 {
    propensity
        .get(k)
        .or(propensity.last())
        .copied()
        .unwrap_or(1.0)
}

/// The click-noise floor `ε̂⁻` of `sessions`, on the scale of `c/θ̂` (`propensity` relative to
/// rank 1, as [`estimate_propensities`] gives it; ranks beyond it take its last value): the
/// [`NOISE_FLOOR_QUANTILE`] of the attractiveness distribution over the shown (query,
/// document) pairs, estimated by nonparametric maximum likelihood (see the module doc).
/// Each pair's likelihood at attractiveness g is `Π_k (θ̂_k·g)^{c_k} (1 − θ̂_k·g)^{n_k − c_k}`
/// over the ranks k it was shown at (`n_k` impressions, `c_k` clicks); EM moves the weights of
/// a grid of g values, from uniform, towards the mixture that explains all pairs best.
/// 0 without a session.
pub fn estimate_noise_floor(sessions: &[RowSession], propensity: &[f64]) -> f64 {
    // (qid, row) → rank → (impressions, clicks).
    type ByRank = BTreeMap<usize, (u64, u64)>;
    let mut pairs: BTreeMap<(&str, usize), ByRank> = BTreeMap::new();
    for s in sessions {
        for (k, &row) in s.shown.iter().enumerate() {
            let e = pairs
                .entry((s.qid.as_str(), row))
                .or_default()
                .entry(k)
                .or_default();
            e.0 += 1;
            e.1 += u64::from(s.clicks.contains(&row));
        }
    }
    // Pairs with the same impressions and clicks at the same ranks have the same likelihood:
    // one profile, counted.
    let mut profiles: BTreeMap<Vec<(usize, u64, u64)>, f64> = BTreeMap::new();
    for by_rank in pairs.values() {
        let p = by_rank.iter().map(|(&k, &(n, c))| (k, n, c)).collect();
        *profiles.entry(p).or_insert(0.0) += 1.0;
    }
    if profiles.is_empty() {
        return 0.0;
    }
    let stride = profiles.len().div_ceil(FLOOR_MAX_PAIRS);
    let grid: Vec<f64> = (0..FLOOR_GRID)
        .map(|j| (j as f64 + 0.5) / FLOOR_GRID as f64)
        .collect();
    let theta = |k: usize| at_rank(propensity, k);
    // Each kept profile's likelihood on the grid, scaled to a maximum of 1, and its count.
    let mut likelihood: Vec<(Vec<f64>, f64)> = Vec::new();
    for (profile, &count) in profiles.iter().step_by(stride) {
        let log: Vec<f64> = grid
            .iter()
            .map(|&g| {
                profile
                    .iter()
                    .map(|&(k, n, c)| {
                        let p = (theta(k) * g).clamp(1e-12, 1.0 - 1e-12);
                        c as f64 * p.ln() + (n - c) as f64 * (1.0 - p).ln()
                    })
                    .sum()
            })
            .collect();
        let top = log.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        likelihood.push((log.iter().map(|l| (l - top).exp()).collect(), count));
    }
    let total: f64 = likelihood.iter().map(|(_, c)| c).sum();
    let mut weights = vec![1.0 / FLOOR_GRID as f64; FLOOR_GRID];
    let mut next = vec![0.0; FLOOR_GRID];
    for _ in 0..FLOOR_ITERATIONS {
        next.iter_mut().for_each(|v| *v = 0.0);
        for (lik, count) in &likelihood {
            let z: f64 = weights.iter().zip(lik).map(|(w, l)| w * l).sum();
            if z > 0.0 {
                for ((n, w), l) in next.iter_mut().zip(&weights).zip(lik) {
                    *n += count * w * l / z;
                }
            }
        }
        for (w, n) in weights.iter_mut().zip(&next) {
            *w = n / total;
        }
    }
    let mut below = 0.0;
    for (g, w) in grid.iter().zip(&weights) {
        below += w;
        if below >= NOISE_FLOOR_QUANTILE {
            return *g;
        }
    }
    grid[FLOOR_GRID - 1]
}

/// A training set built from clicks, and what went into it.
#[derive(Debug, Clone)]
pub struct ClickSet {
    pub set: RankSet,
    /// Clicks on the set's queries.
    pub clicks: usize,
    /// Clicks whose propensity was below the clip.
    pub clipped: usize,
    /// Clicked documents left out because their noise-corrected weight was ≤ 0.
    pub below_floor: usize,
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
/// last value. `noise_floor` (used by [`Debias::Ips`] only; 0 for none) is subtracted per
/// impression, as [`estimate_noise_floor`] gives it (the module doc); it applies to
/// [`ClickLabels::Binary`] only, and a floor with graded labels is an error. `labels` chooses
/// the groups: one graded group per query with a click, or one binary group per clicked
/// document. With [`Debias::Pairwise`] the groups are [`super::pairwise::list_set`]'s, whatever
/// `labels` says.
pub fn click_set(
    set: &RankSet,
    sessions: &[RowSession],
    debias: Debias,
    labels: ClickLabels,
    propensity: &[f64],
    propensity_clip: f64,
    noise_floor: f64,
) -> Result<ClickSet, Invalid> {
    if !(propensity_clip > 0.0 && propensity_clip <= 1.0) {
        return Err(Invalid(format!(
            "--propensity-clip must be in (0, 1], got {propensity_clip}"
        )));
    }
    if labels == ClickLabels::Graded && debias == Debias::Ips && noise_floor > 0.0 {
        return Err(Invalid(
            "the noise floor applies to binary click labels: graded labels are ordered by \
             their click rates, which a floor subtracted from every impression does not \
             reorder"
                .into(),
        ));
    }
    if debias == Debias::Pairwise {
        let l = super::pairwise::list_set(set, sessions, DEFAULT_BIAS_NORM)?;
        return Ok(ClickSet {
            set: l.set,
            clicks: l.clicks,
            clipped: 0,
            below_floor: 0,
            sessions: l.sessions,
            lists: Some(l.lists),
        });
    }
    let by_qid = set.query_index();
    // (query index, row within the query) → Σ c/θ̂, in a stable order.
    let mut weights: BTreeMap<(usize, usize), f64> = BTreeMap::new();
    // Per query, the rows shown in at least one session, and its sessions.
    let mut shown: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); set.queries.len()];
    let mut query_sessions = vec![0usize; set.queries.len()];
    // The floor each impression of a (query, row) owes, Σ θ̂_k·ε̂⁻/max(θ̂_k, clip).
    let mut owed: BTreeMap<(usize, usize), f64> = BTreeMap::new();
    let floor = if debias == Debias::Ips {
        noise_floor
    } else {
        0.0
    };
    let rank_propensity = |k: usize| at_rank(propensity, k);
    let (mut clicks, mut clipped, mut used) = (0, 0, 0);
    for s in sessions {
        let Some(&qi) = by_qid.get(s.qid.as_str()) else {
            continue;
        };
        used += 1;
        query_sessions[qi] += 1;
        shown[qi].extend(s.shown.iter().copied());
        if floor > 0.0 {
            for (k, &row) in s.shown.iter().enumerate() {
                let p = rank_propensity(k);
                *owed.entry((qi, row)).or_insert(0.0) += floor * p / p.max(propensity_clip);
            }
        }
        for (k, row) in s.clicked_ranks() {
            clicks += 1;
            let w = match debias {
                Debias::None | Debias::Pairwise => 1.0,
                Debias::Ips => {
                    let p = rank_propensity(k);
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
    if labels == ClickLabels::Graded {
        let set = graded_set(set, &weights, &shown, &query_sessions)?;
        return Ok(ClickSet {
            set,
            clicks,
            clipped,
            below_floor: 0,
            sessions: used,
            lists: None,
        });
    }
    let mut below_floor = 0;
    weights.retain(|key, w| {
        *w -= owed.get(key).copied().unwrap_or(0.0);
        let keep = *w > 0.0;
        below_floor += usize::from(!keep);
        keep
    });
    if weights.is_empty() {
        return Err(Invalid(format!(
            "no clicked document of the {} queries is clicked more than the noise floor \
             ({floor:.4}) explains: nothing to learn from",
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
        below_floor,
        sessions: used,
        lists: None,
    })
}

/// [`ClickLabels::Graded`]'s groups: for each query with a click (in `set`'s order), the rows
/// it showed (`shown`, in row order), each labelled `round(GRADED_LABEL_SCALE · w / N_q)` —
/// `w` its `Σ c/θ̂` from `weights` (0 unclicked), `N_q` the query's sessions — and weight 1.
fn graded_set(
    set: &RankSet,
    weights: &BTreeMap<(usize, usize), f64>,
    shown: &[BTreeSet<usize>],
    query_sessions: &[usize],
) -> Result<RankSet, Invalid> {
    let clicked: BTreeSet<usize> = weights.keys().map(|&(qi, _)| qi).collect();
    let d = set.num_features();
    let (mut x, mut labels, mut groups) = (Vec::new(), Vec::new(), Vec::new());
    for qi in clicked {
        let q = &set.queries[qi];
        let start = labels.len();
        for &r in &shown[qi] {
            let at = q.rows.start + r;
            x.extend_from_slice(&set.x[at * d..(at + 1) * d]);
            let rate = weights.get(&(qi, r)).copied().unwrap_or(0.0) / query_sessions[qi] as f64;
            // `as` saturates: a rate beyond i32 (a clip near 0) stays the largest label.
            labels.push((GRADED_LABEL_SCALE * rate).round() as i32);
        }
        groups.push(QueryGroup::new(q.qid.clone(), start..labels.len()));
    }
    RankSet::new(set.feature_names.clone(), x, labels, groups, None)
        .map_err(|e| Invalid(format!("click training set: {e}")))
}

#[cfg(test)]
mod tests {
    use super::super::semi_synthetic::{simulate, Protocol};
    use super::super::sessions::test_session as session;
    use super::*;

    /// Each training group of a click set: its query id, weight and rows.
    fn groups(c: &ClickSet) -> Vec<(&str, f64, std::ops::Range<usize>)> {
        c.set
            .queries
            .iter()
            .map(|q| (q.qid.as_str(), q.weight, q.rows.clone()))
            .collect()
    }

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
        let c = click_set(
            &set(),
            &sessions,
            Debias::Ips,
            ClickLabels::Binary,
            &propensity,
            0.01,
            0.0,
        )
        .unwrap();
        assert_eq!((c.clicks, c.clipped, c.sessions), (3, 1, 3));
        let groups = groups(&c);
        // Row 0: 1/0.5 + 1/1; row 1: clipped at 1/0.01.
        assert_eq!(groups, [("a#0", 3.0, 0..3), ("a#1", 100.0, 3..6)]);
        assert_eq!(c.set.labels, [1, 0, 0, 0, 1, 0]);
        // Every row of the query, features as in the file.
        assert_eq!(c.set.x[..6], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(c.set.x[6..], c.set.x[..6]);

        let naive = click_set(
            &set(),
            &sessions,
            Debias::None,
            ClickLabels::Binary,
            &[],
            0.01,
            0.0,
        )
        .unwrap();
        let w: Vec<f64> = naive.set.queries.iter().map(|q| q.weight).collect();
        assert_eq!(w, [2.0, 1.0]);
    }

    /// Graded labels by hand: one group per query with a click, its shown rows in row order,
    /// each labelled with its `Σ c/θ̂` over the query's sessions, in thousandths; weight 1.
    #[test]
    fn graded_labels_are_each_shown_rows_click_rate_over_its_querys_sessions() {
        let sessions = [
            session("a", &[2, 0, 1], &[0]),    // row 0 at rank 2
            session("a", &[0, 2, 1], &[0, 1]), // row 0 at rank 1, row 1 at rank 3
            session("b", &[1, 0], &[]),
            session("b", &[1, 0], &[0]), // row 0 at rank 2
            session("b", &[0, 1], &[]),
            session("z", &[0], &[0]), // another split's query
        ];
        let propensity = [1.0, 0.5, 0.004];
        let graded = |debias, propensity: &[f64]| {
            click_set(
                &set(),
                &sessions,
                debias,
                ClickLabels::Graded,
                propensity,
                0.01,
                0.0,
            )
            .unwrap()
        };
        let c = graded(Debias::Ips, &propensity);
        assert_eq!((c.clicks, c.clipped, c.sessions), (4, 1, 5));
        let groups = groups(&c);
        assert_eq!(groups, [("a", 1.0, 0..3), ("b", 1.0, 3..5)]);
        // a (2 sessions): row 0 (1/0.5 + 1/1)/2 = 1.5; row 1 clipped, (1/0.01)/2 = 50; row 2
        // never clicked. b (3 sessions): row 0 (1/0.5)/3 = 0.6667, rounded; row 1 0.
        assert_eq!(c.set.labels, [1500, 50_000, 0, 667, 0]);
        assert_eq!(c.set.x[..6], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(c.set.x[6..], [6.0, 7.0, 8.0, 9.0]);
        // Naive: the click-through rates, a 2/2 and 1/2, b 1/3.
        let naive = graded(Debias::None, &[]);
        assert_eq!(naive.set.labels, [1000, 500, 0, 333, 0]);
        // A query without a click has nothing to order and is left out.
        let a_only = click_set(
            &set(),
            &sessions[..3],
            Debias::Ips,
            ClickLabels::Graded,
            &propensity,
            0.01,
            0.0,
        )
        .unwrap();
        assert_eq!(a_only.set.queries.len(), 1);
        assert_eq!(a_only.set.labels, [1500, 50_000, 0]);
        // The noise floor is for binary labels.
        let e = click_set(
            &set(),
            &sessions,
            Debias::Ips,
            ClickLabels::Graded,
            &propensity,
            0.01,
            0.1,
        )
        .unwrap_err()
        .0;
        assert!(e.contains("binary click labels"), "{e}");
    }

    /// The affine correction by hand: every impression owes `θ̂_k·ε̂/max(θ̂_k, clip)`, clicked or
    /// not, and a document clicked no more than the floor explains is left out.
    #[test]
    fn the_noise_floor_is_subtracted_per_impression() {
        let mut sessions = vec![
            session("a", &[2, 0, 1], &[0]),    // row 0 clicked at rank 2
            session("a", &[0, 2, 1], &[0, 1]), // row 0 clicked at rank 1, row 1 at rank 3
            session("a", &[1, 0], &[]),        // row 1 at rank 1, row 0 at rank 2
            session("b", &[1, 0], &[1]),
        ];
        // Row 1 of b: five more impressions at rank 1, never clicked.
        sessions.extend((0..5).map(|_| session("b", &[1, 0], &[])));
        let propensity = [1.0, 0.5, 0.004];
        let c = click_set(
            &set(),
            &sessions,
            Debias::Ips,
            ClickLabels::Binary,
            &propensity,
            0.01,
            0.2,
        )
        .unwrap();
        assert_eq!((c.clicks, c.clipped, c.below_floor), (4, 1, 1));
        let groups: Vec<(&str, f64)> = c
            .set
            .queries
            .iter()
            .map(|q| (q.qid.as_str(), q.weight))
            .collect();
        // a#0: clicks 1/0.5 + 1/1 = 3; impressions at ranks 2, 1, 2 owe 0.2 each: 2.4.
        // a#1: one click at rank 3, clipped: 1/0.01 = 100; its two impressions at rank 3 owe
        // 0.2·0.004/0.01 = 0.08 each, the one at rank 1 0.2: 100 − 0.36 = 99.64.
        // b#1: one click at rank 1 against six impressions there: 1 − 1.2 < 0, left out.
        let want = [("a#0", 2.4), ("a#1", 99.64)];
        assert_eq!(groups.len(), want.len());
        for ((q, w), (wq, ww)) in groups.iter().zip(want) {
            assert_eq!(*q, wq);
            assert!((w - ww).abs() < 1e-9, "{q}: {w} vs {ww}");
        }
        // Without IPS the floor is not applied.
        let naive = click_set(
            &set(),
            &sessions,
            Debias::None,
            ClickLabels::Binary,
            &[],
            0.01,
            0.2,
        )
        .unwrap();
        let w: Vec<f64> = naive.set.queries.iter().map(|q| q.weight).collect();
        assert_eq!((w, naive.below_floor), (vec![2.0, 1.0, 1.0], 0));
        // A floor that explains every click leaves nothing to learn from.
        let e = click_set(
            &set(),
            &sessions,
            Debias::Ips,
            ClickLabels::Binary,
            &propensity,
            0.01,
            500.0,
        )
        .unwrap_err()
        .0;
        assert!(e.contains("noise floor"), "{e}");
    }

    /// Sessions of the semi-synthetic protocol over 40 queries of 10 rows, grades 0..4 in
    /// equal shares, click noise `eps_minus`.
    fn protocol_sessions(eps_minus: f64, sessions: usize) -> (RankSet, Vec<RowSession>) {
        let protocol = Protocol {
            sessions,
            eps_minus,
            ..Protocol::default()
        };
        simulated(&protocol)
    }

    /// `protocol`'s sessions over 40 queries of 10 rows, grades 0..4 in equal shares, logged
    /// by a fixed ranking.
    fn simulated(protocol: &Protocol) -> (RankSet, Vec<RowSession>) {
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
        let sessions = simulate(protocol, &set, &scores).unwrap();
        (set, sessions)
    }

    /// The floor is estimated from the sessions alone, propensities estimated too: within
    /// 0.02 of the simulator's ε⁻ for 0 (no noise) and 0.1 (the protocol's); at 0.2 it errs
    /// low, as the quantile does when the next grade (0.25) is close, and is within 0.03.
    #[test]
    fn the_noise_floor_estimated_from_simulated_sessions_matches_the_truth() {
        for (eps_minus, tolerance) in [(0.0, 0.02), (0.1, 0.02), (0.2, 0.03)] {
            let (set, sessions) = protocol_sessions(eps_minus, 30_000);
            let propensity =
                estimate_propensities(&sessions, &set, PropensityModel::Pbm, PROPENSITY_ITERATIONS)
                    .unwrap();
            let floor = estimate_noise_floor(&sessions, &propensity);
            eprintln!("ε⁻ {eps_minus}: estimated {floor}");
            assert!(
                (floor - eps_minus).abs() < tolerance,
                "ε⁻ {eps_minus}: estimated {floor}"
            );
        }
        assert_eq!(estimate_noise_floor(&[], &[1.0]), 0.0);
    }

    #[test]
    fn no_click_or_a_bad_clip_is_an_error() {
        let sessions = [session("a", &[0, 1], &[])];
        let e = click_set(
            &set(),
            &sessions,
            Debias::Ips,
            ClickLabels::Binary,
            &[1.0],
            0.01,
            0.0,
        )
        .unwrap_err()
        .0;
        assert!(e.contains("no click"), "{e}");
        let e = click_set(
            &set(),
            &sessions,
            Debias::Ips,
            ClickLabels::Binary,
            &[1.0],
            0.0,
            0.0,
        )
        .unwrap_err()
        .0;
        assert!(e.contains("--propensity-clip"), "{e}");
    }

    /// The protocol's position bias is recovered from its own sessions, swaps included.
    #[test]
    fn propensities_estimated_from_swapped_sessions_match_the_truth() {
        let protocol = Protocol {
            sessions: 60_000,
            swap_share: 0.2,
            ..Protocol::default()
        };
        let (set, sessions) = simulated(&protocol);
        let got =
            estimate_propensities(&sessions, &set, PropensityModel::Pbm, PROPENSITY_ITERATIONS)
                .unwrap();
        for (k, p) in got.iter().enumerate() {
            let truth = protocol.examination(k + 1);
            assert!((p - truth).abs() < 0.05, "rank {}: {p} vs {truth}", k + 1);
        }
    }
}
