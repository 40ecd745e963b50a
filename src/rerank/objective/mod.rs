//! Ranking objectives (SPEC §3.3–3.4), one file each, dispatched by [`Objective`].
//!
//! Every objective is a per-query function: given the model's raw scores `g` of one query's
//! rows and their labels, it returns the query's loss and `∂loss/∂g_r` per row, or `None`
//! when the query cannot contribute (e.g. no positive–negative pair); the trainer averages
//! over the queries of a batch and counts the skipped ones. A pure per-query objective
//! (such as seed 001's structured hinges, `(scores, labels) -> (loss, grad)`) is one more
//! variant of [`Objective`] and one more arm in [`Objective::query_loss`].
//!
//! Two objectives keep per-query state between batches ([`QueryState`]): the stable AP loss
//! its mean positive score μ̂_q, updated from the current and the previous parameters'
//! scores, and SOPRC a moving quantile vector of the positive scores.

mod lambdarank;
mod ranknet;
mod smooth_ap;
mod soprc;
mod stable_ap;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use lambdarank::{
    debiased_lambda_grad_hess, lambda_grad_hess, max_dcg_at, LambdaMetric, LambdaParams, PairDebias,
};
pub use ranknet::ranknet_loss_grad;
pub use smooth_ap::smooth_ap_loss_grad;
pub use soprc::Soprc;
pub use stable_ap::{stable_ap_loss_grad, stable_ap_weights, StableAp, StableApHessian};

use super::RerankError;

/// A hyperparameter outside its domain (see [`Objective::out_of_range`]).
#[derive(Debug, Clone, PartialEq)]
pub struct OutOfRange {
    /// The objective's name for the parameter (`tau`, `beta`, `lambda_pos`, ...).
    pub param: &'static str,
    pub value: f64,
    /// The domain in words, to follow "must be".
    pub domain: String,
}

/// The domains hyperparameters take.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Domain {
    /// Finite and > 0.
    Positive,
    /// Finite and ≥ 0.
    NonNegative,
    /// In (0, 1].
    UnitInterval,
    /// An integer ≥ 1.
    AtLeastOne,
    /// An integer in 1..=max.
    UpTo(usize),
}

impl Domain {
    fn contains(self, v: f64) -> bool {
        match self {
            Domain::Positive => v.is_finite() && v > 0.0,
            Domain::NonNegative => v.is_finite() && v >= 0.0,
            Domain::UnitInterval => v > 0.0 && v <= 1.0,
            Domain::AtLeastOne => v >= 1.0,
            Domain::UpTo(max) => v >= 1.0 && v <= max as f64,
        }
    }

    fn words(self) -> String {
        match self {
            Domain::Positive => "a positive number".into(),
            Domain::NonNegative => "a finite number ≥ 0".into(),
            Domain::UnitInterval => "in (0, 1]".into(),
            Domain::AtLeastOne => "at least 1".into(),
            Domain::UpTo(max) => format!("at least 1 and at most {max}"),
        }
    }
}

/// The first of `checks` (name, value, domain) whose value is outside its domain.
pub(crate) fn first_out_of_range(checks: &[(&'static str, f64, Domain)]) -> Option<OutOfRange> {
    checks
        .iter()
        .find(|(_, value, domain)| !domain.contains(*value))
        .map(|&(param, value, domain)| OutOfRange {
            param,
            value,
            domain: domain.words(),
        })
}

/// Which objective (the CLI's `--objective`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ObjectiveKind {
    /// Stable AP surrogate (SPEC §3.3), the default.
    StableAp,
    /// Pairwise logistic over all pairs i ≻ j by grade (SPEC §3.4).
    Ranknet,
    /// Naive smoothed AP, the unstable surrogate seed 000 argues against (SPEC §3.4).
    SmoothAp,
    /// AP structured hinge with seed 001's quicksort loss-augmented inference (SPEC §3.4).
    ApHingeQs,
    /// Full-NDCG structured hinge with the same inference (SPEC §3.4).
    NdcgHingeQs,
    /// Seed 003's AUPRC estimator with a per-query quantile state (SPEC §3.4).
    Soprc,
    /// LambdaMART's lambdas with |ΔNDCG| (LightGBM's lambdarank; SPEC §3.6).
    LambdaNdcg,
    /// LambdaMART's lambdas with |ΔAP| (XGBoost's `rank:map`; SPEC §3.6).
    LambdaAp,
}

/// An objective with all its hyperparameters (stored in model files).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "kebab-case")]
pub enum Objective {
    StableAp(StableAp),
    Ranknet {
        /// σ of `ln(1 + exp(−σ(f_i − f_j)))`.
        sigma: f32,
    },
    SmoothAp {
        /// Margin of the one-sided Huber surrogate (on sigmoid scores, as stable AP).
        tau: f32,
        /// Grades at or above this are positive.
        threshold: i32,
        /// Average over every relevance level instead of one threshold (see [`graded_mean`]).
        #[serde(default)]
        graded: bool,
    },
    /// `max_y [Δ_AP(y*, y) + F(y) − F(y*)]` on the raw scores g (the hinge is linear in them).
    ApHingeQs {
        /// Grades at or above this are relevant.
        threshold: i32,
    },
    /// As `ApHingeQs` with Δ = 1 − NDCG (binary gains, labels ≥ threshold relevant).
    NdcgHingeQs {
        threshold: i32,
    },
    Soprc(Soprc),
    /// LambdaMART's NDCG lambdas, LightGBM's formulas (SPEC §3.6). Trains the
    /// gradient-boosted trees of [`crate::rerank::gbdt`]; networks can use it too.
    LambdaNdcg(LambdaParams),
    /// LambdaMART with |ΔAP| in place of |ΔNDCG| (XGBoost's `rank:map`; SPEC §3.6).
    LambdaAp(LambdaParams),
    /// The objective of a model trained by another library and imported: what that file
    /// names it (`lambdarank`, `rank:ndcg`, …). rankd cannot train with it.
    External {
        library: String,
        objective: Option<String>,
    },
}

/// An objective's name as reports and the model registry show it: one rankd trains with
/// ([`ObjectiveKind`], the `--objective` values) or that of an imported model. Serialises as
/// the kebab-case name (`stable-ap`, `lambda-ndcg`, `external`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectiveName {
    Kind(ObjectiveKind),
    External,
}

impl ObjectiveName {
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectiveName::Kind(k) => match k {
                ObjectiveKind::StableAp => "stable-ap",
                ObjectiveKind::Ranknet => "ranknet",
                ObjectiveKind::SmoothAp => "smooth-ap",
                ObjectiveKind::ApHingeQs => "ap-hinge-qs",
                ObjectiveKind::NdcgHingeQs => "ndcg-hinge-qs",
                ObjectiveKind::Soprc => "soprc",
                ObjectiveKind::LambdaNdcg => "lambda-ndcg",
                ObjectiveKind::LambdaAp => "lambda-ap",
            },
            ObjectiveName::External => "external",
        }
    }
}

impl Serialize for ObjectiveName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl PartialEq<ObjectiveKind> for ObjectiveName {
    fn eq(&self, other: &ObjectiveKind) -> bool {
        *self == ObjectiveName::Kind(*other)
    }
}

/// What one query contributes to a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryLoss {
    pub loss: f64,
    /// `∂loss/∂g_r` for every row of the query.
    pub grad: Vec<f64>,
    /// Pairs the loss looked at (for throughput reports).
    pub pairs: usize,
}

/// One query's scores as the trainer hands them over.
pub struct QueryInput<'a> {
    /// Raw model outputs g under the current parameters θ_k.
    pub scores: &'a [f32],
    /// The same rows under the previous parameters θ_{k−1} (only if
    /// [`Objective::needs_previous_scores`]; `None` on the very first step).
    pub previous_scores: Option<&'a [f32]>,
    pub labels: &'a [i32],
    /// The labels of every row of the query: `labels` itself unless the trainer sampled
    /// rows (`--sample-rows`); SOPRC takes the query's positive rate from it.
    pub query_labels: &'a [i32],
}

impl Objective {
    /// The objective with SPEC §3.3–3.4 defaults and margin τ (Huber-based objectives).
    pub fn with_defaults(kind: ObjectiveKind, tau: f32, threshold: i32) -> Objective {
        match kind {
            ObjectiveKind::StableAp => Objective::StableAp(StableAp {
                tau,
                threshold,
                ..StableAp::default()
            }),
            ObjectiveKind::Ranknet => Objective::Ranknet { sigma: 1.0 },
            ObjectiveKind::ApHingeQs => Objective::ApHingeQs { threshold },
            ObjectiveKind::NdcgHingeQs => Objective::NdcgHingeQs { threshold },
            ObjectiveKind::SmoothAp => Objective::SmoothAp {
                tau,
                threshold,
                graded: false,
            },
            ObjectiveKind::Soprc => Objective::Soprc(Soprc {
                tau1: tau,
                threshold,
                ..Soprc::default()
            }),
            ObjectiveKind::LambdaNdcg => Objective::LambdaNdcg(LambdaParams {
                threshold,
                ..LambdaParams::default()
            }),
            ObjectiveKind::LambdaAp => Objective::LambdaAp(LambdaParams {
                threshold,
                ..LambdaParams::default()
            }),
        }
    }

    pub fn kind(&self) -> ObjectiveName {
        ObjectiveName::Kind(match self {
            Objective::StableAp(_) => ObjectiveKind::StableAp,
            Objective::Ranknet { .. } => ObjectiveKind::Ranknet,
            Objective::SmoothAp { .. } => ObjectiveKind::SmoothAp,
            Objective::ApHingeQs { .. } => ObjectiveKind::ApHingeQs,
            Objective::NdcgHingeQs { .. } => ObjectiveKind::NdcgHingeQs,
            Objective::Soprc(_) => ObjectiveKind::Soprc,
            Objective::LambdaNdcg(_) => ObjectiveKind::LambdaNdcg,
            Objective::LambdaAp(_) => ObjectiveKind::LambdaAp,
            Objective::External { .. } => return ObjectiveName::External,
        })
    }

    /// Rejects hyperparameters outside their domain, naming them.
    pub fn validate(&self) -> Result<(), RerankError> {
        match self.out_of_range() {
            None => Ok(()),
            Some(e) => Err(RerankError::invalid(format!(
                "objective {} parameter {} = {} is out of range: it must be {}",
                self.kind().as_str(),
                e.param,
                e.value,
                e.domain
            ))),
        }
    }

    /// The first hyperparameter outside its domain, by the objective's own name for it. The
    /// domains are written here once: [`Objective::validate`] and the training settings (which
    /// name the same values by their knobs) both read them.
    pub fn out_of_range(&self) -> Option<OutOfRange> {
        match self {
            Objective::StableAp(p) => p.out_of_range(),
            Objective::Soprc(p) => p.out_of_range(),
            Objective::Ranknet { sigma } => {
                first_out_of_range(&[("sigma", f64::from(*sigma), Domain::Positive)])
            }
            Objective::SmoothAp { tau, threshold, .. } => first_out_of_range(&[
                ("tau", f64::from(*tau), Domain::Positive),
                ("threshold", f64::from(*threshold), Domain::AtLeastOne),
            ]),
            Objective::ApHingeQs { threshold } | Objective::NdcgHingeQs { threshold } => {
                first_out_of_range(&[("threshold", f64::from(*threshold), Domain::AtLeastOne)])
            }
            Objective::LambdaNdcg(p) | Objective::LambdaAp(p) => first_out_of_range(&[
                ("sigma", p.sigma, Domain::Positive),
                ("truncation", p.truncation as f64, Domain::AtLeastOne),
                ("threshold", f64::from(p.threshold), Domain::AtLeastOne),
            ]),
            Objective::External { .. } => None,
        }
    }

    /// Whether [`QueryInput::previous_scores`] is used (stable AP's variance-reduction term).
    pub fn needs_previous_scores(&self) -> bool {
        matches!(self, Objective::StableAp(_))
    }

    /// The grade at or above which a row is positive, for objectives that see one binary
    /// split per query (None for RankNet and the graded variants, which use every level).
    pub fn threshold(&self) -> Option<i32> {
        match self {
            Objective::StableAp(p) if !p.graded => Some(p.threshold),
            Objective::Soprc(p) if !p.graded => Some(p.threshold),
            Objective::SmoothAp {
                threshold,
                graded: false,
                ..
            } => Some(*threshold),
            Objective::ApHingeQs { threshold } | Objective::NdcgHingeQs { threshold } => {
                Some(*threshold)
            }
            Objective::LambdaAp(p) => Some(p.threshold),
            _ => None,
        }
    }

    /// One query's loss and gradient, or `None` if the query is skipped. `state` is the
    /// query's state from earlier batches (empty until the query is first seen).
    pub fn query_loss(
        &self,
        input: &QueryInput,
        state: &mut QueryState,
    ) -> Result<Option<QueryLoss>, RerankError> {
        if input.scores.len() != input.labels.len() {
            return Err(RerankError::invalid(format!(
                "{} scores for {} labels",
                input.scores.len(),
                input.labels.len()
            )));
        }
        match self {
            Objective::StableAp(p) => p.query_loss(input, state),
            Objective::Soprc(p) => p.query_loss(input, state),
            Objective::Ranknet { sigma } => ranknet_loss_grad(input.scores, input.labels, *sigma),
            Objective::SmoothAp {
                tau,
                threshold,
                graded,
            } => graded_mean(input.labels, *threshold, *graded, |t| {
                smooth_ap_loss_grad(input.scores, input.labels, *tau, t)
            }),
            Objective::ApHingeQs { threshold } => {
                hinge_loss_grad(input, *threshold, super::hinge::RankLoss::Ap)
            }
            Objective::NdcgHingeQs { threshold } => {
                hinge_loss_grad(input, *threshold, super::hinge::RankLoss::Ndcg)
            }
            Objective::LambdaNdcg(p) => Ok(lambdarank::lambda_query_loss(
                input.scores,
                input.labels,
                LambdaMetric::Ndcg,
                p,
            )),
            Objective::LambdaAp(p) => Ok(lambdarank::lambda_query_loss(
                input.scores,
                input.labels,
                LambdaMetric::Ap,
                p,
            )),
            Objective::External { library, objective } => Err(RerankError::invalid(format!(
                "the {library} objective {} of an imported model cannot train in rankd",
                objective.as_deref().unwrap_or("(unnamed)")
            ))),
        }
    }
}

/// Seed 001's structured hinge of one query; skipped (None) without both a relevant and a
/// non-relevant row, like the other binary objectives.
fn hinge_loss_grad(
    input: &QueryInput,
    threshold: i32,
    loss: super::hinge::RankLoss,
) -> Result<Option<QueryLoss>, RerankError> {
    let relevant: Vec<bool> = input.labels.iter().map(|&l| l >= threshold).collect();
    let positives = relevant.iter().filter(|&&r| r).count();
    let negatives = relevant.len() - positives;
    if positives == 0 || negatives == 0 {
        return Ok(None);
    }
    let mut grad = vec![0.0; input.scores.len()];
    let value = super::hinge::HingeScratch::new()
        .hinge(
            loss,
            super::hinge::Inference::Quicksort,
            input.scores,
            &relevant,
            &mut grad,
        )
        .map_err(|e| RerankError::invalid(e.to_string()))?;
    Ok(Some(QueryLoss {
        loss: value,
        grad,
        pairs: positives * negatives,
    }))
}

/// Per-query state kept between batches, one entry per relevance level: stable AP's μ̂_q and
/// SOPRC's quantile vector v_q of the positive scores.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueryState {
    pub mu: BTreeMap<i32, f64>,
    pub quantiles: BTreeMap<i32, Vec<f32>>,
}

impl QueryState {
    pub fn new() -> QueryState {
        QueryState::default()
    }

    pub fn is_empty(&self) -> bool {
        self.mu.is_empty() && self.quantiles.is_empty()
    }
}

/// The relevance thresholds a query is scored at: `[threshold]` for the binary objectives;
/// with `graded`, every grade ≥ `threshold` present in the query above its lowest grade
/// (positives = rows at or above the level, negatives = the rest). A graded AP objective is
/// the mean of the binary objective over these levels — as graded average precision
/// (Robertson, Kanoulas & Yilmaz 2010) averages AP over thresholds — so queries whose rows
/// are all relevant at grade ≥ 1 still teach the order among grades.
pub(crate) fn relevance_levels(labels: &[i32], threshold: i32, graded: bool) -> Vec<i32> {
    if !graded {
        return vec![threshold];
    }
    let lowest = labels.iter().copied().min().unwrap_or(threshold);
    let mut levels: Vec<i32> = labels
        .iter()
        .copied()
        .filter(|&g| g >= threshold && g > lowest)
        .collect();
    levels.sort_unstable();
    levels.dedup();
    levels
}

/// The mean of a binary per-query objective over [`relevance_levels`]; `None` if no level
/// gives a loss.
pub(crate) fn graded_mean(
    labels: &[i32],
    threshold: i32,
    graded: bool,
    mut at_level: impl FnMut(i32) -> Result<Option<QueryLoss>, RerankError>,
) -> Result<Option<QueryLoss>, RerankError> {
    let mut total: Option<QueryLoss> = None;
    let mut used = 0usize;
    for level in relevance_levels(labels, threshold, graded) {
        let Some(q) = at_level(level)? else { continue };
        used += 1;
        match total.as_mut() {
            None => total = Some(q),
            Some(t) => {
                t.loss += q.loss;
                t.pairs += q.pairs;
                t.grad.iter_mut().zip(&q.grad).for_each(|(a, b)| *a += b);
            }
        }
    }
    if let Some(t) = total.as_mut() {
        let scale = 1.0 / used as f64;
        t.loss *= scale;
        t.grad.iter_mut().for_each(|g| *g *= scale);
    }
    Ok(total)
}

/// `sigmoid(g)`, the bounded score of SPEC §3.3, in f64 (no overflow for any finite g).
pub(crate) fn sigmoid(g: f32) -> f64 {
    let g = f64::from(g);
    if g >= 0.0 {
        1.0 / (1.0 + (-g).exp())
    } else {
        let e = g.exp();
        e / (1.0 + e)
    }
}

/// Splits rows into positives (grade ≥ threshold) and negatives: their indices.
pub(crate) fn split_by_threshold(labels: &[i32], threshold: i32) -> (Vec<usize>, Vec<usize>) {
    (0..labels.len()).partition(|&r| labels[r] >= threshold)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relevance_levels_by_hand() {
        assert_eq!(relevance_levels(&[0, 2, 1, 2], 1, false), [1]);
        assert_eq!(relevance_levels(&[0, 2, 1, 2], 1, true), [1, 2]);
        // All relevant at grade ≥ 1: only the level that splits them.
        assert_eq!(relevance_levels(&[1, 3, 1], 1, true), [3]);
        assert_eq!(relevance_levels(&[2, 2], 1, true), Vec::<i32>::new());
        assert_eq!(relevance_levels(&[0, 1, 4], 2, true), [4]);
    }

    /// The graded objective is the mean of the binary objective at each level.
    #[test]
    fn graded_is_the_mean_over_levels() {
        let scores = [0.3f32, -1.0, 2.0, 0.5, -0.2];
        let labels = [0, 1, 3, 1, 0];
        let graded = Objective::SmoothAp {
            tau: 0.1,
            threshold: 1,
            graded: true,
        };
        let q = graded
            .query_loss(
                &QueryInput {
                    scores: &scores,
                    previous_scores: None,
                    labels: &labels,
                    query_labels: &labels,
                },
                &mut QueryState::new(),
            )
            .unwrap()
            .unwrap();
        let a = smooth_ap_loss_grad(&scores, &labels, 0.1, 1)
            .unwrap()
            .unwrap();
        let b = smooth_ap_loss_grad(&scores, &labels, 0.1, 3)
            .unwrap()
            .unwrap();
        assert!((q.loss - (a.loss + b.loss) / 2.0).abs() < 1e-15);
        for r in 0..5 {
            assert!((q.grad[r] - (a.grad[r] + b.grad[r]) / 2.0).abs() < 1e-15);
        }
        // Stable AP keeps one μ̂ per level.
        let stable = Objective::StableAp(StableAp {
            graded: true,
            ..StableAp::default()
        });
        let mut state = QueryState::new();
        let input = QueryInput {
            scores: &scores,
            previous_scores: None,
            labels: &labels,
            query_labels: &labels,
        };
        stable.query_loss(&input, &mut state).unwrap().unwrap();
        assert_eq!(state.mu.keys().copied().collect::<Vec<_>>(), [1, 3]);
        // Mean of sigmoid scores of the grade-3 row alone: μ̂ at level 3 is sigmoid(2).
        assert!((state.mu[&3] - sigmoid(2.0)).abs() < 1e-12);
    }
}
