//! The activation guard: a reranker is served only when it does not make search worse.
//!
//! Before a model becomes the active reranker (the demo, `POST /admin/train` with `activate`,
//! `POST /admin/models/{id}/activate`), it is compared on held-out judged queries, class by
//! class (known items, item names, questions, ...: a model can win on average and lose on the
//! queries one kind of user types), against the first phase it reranks and against the model
//! it would replace. The measure is MRR@10 of the first-phase window reordered by each model:
//! what a user sees on the first page. A model loses on a class when the paired difference's
//! 95% confidence interval lies wholly below zero: a bootstrap over the class's queries
//! (percentile interval, resampled with a fixed seed so a verdict is reproducible), which
//! assumes nothing about the shape of per-query differences that are mostly 0 and ±1.
//!
//! A class of fewer than [`MIN_QUERIES`] held-out queries is reported but cannot refuse.
//! A losing model is refused (the caller registers it inactive with the reason); the
//! operator may override with `force`, which the callers log. Rolling back to a previously
//! active model is not guarded: it was served before, and rollback is the way out of a bad
//! activation.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::{judged_windows, JudgedQuery, Window, DEFAULT_FIRST_PHASE};
use crate::eval::metrics::{reciprocal_rank, JudgedRanking};
use crate::features::Prf;
use crate::rerank::RerankError;
use crate::search::model::{ActiveModel, DEFAULT_WINDOW};
use crate::search::{Engine, SearchError};

/// The rank cut-off of the guard's MRR.
pub const CUTOFF: usize = 10;
/// The share of judged queries a training that is to activate holds out for the guard.
pub const HELD_OUT_FRACTION: f64 = 0.2;
/// A class with fewer held-out queries is reported but cannot refuse a model: its interval
/// says too little (two queries that both got worse are no evidence).
pub const MIN_QUERIES: usize = 10;
/// Bootstrap resamples of each interval.
const RESAMPLES: usize = 2000;
/// Fixed, so the same judgments give the same verdict.
const SEED: u64 = 0x5eed;

/// A paired difference (candidate − baseline) of per-query MRR@10 and its 95% interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Difference {
    pub mean: f64,
    pub low: f64,
    pub high: f64,
}

impl Difference {
    /// Whether the whole interval is below zero: worse beyond the interval.
    pub fn loses(&self) -> bool {
        self.high < 0.0
    }
}

/// One class of held-out queries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ClassComparison {
    pub class: String,
    pub queries: usize,
    /// MRR@10 of the first phase's order.
    pub first_phase: f64,
    /// MRR@10 of the model being replaced, when one is active.
    pub active: Option<f64>,
    /// MRR@10 of the candidate.
    pub candidate: f64,
    pub vs_first_phase: Difference,
    pub vs_active: Option<Difference>,
}

/// The guard's report on a candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Comparison {
    /// Always `mrr@10`.
    pub metric: String,
    pub candidate: String,
    /// The model it would replace.
    pub active: Option<String>,
    pub classes: Vec<ClassComparison>,
    /// Why the candidate may not be activated; `None` when it may.
    pub refused: Option<String>,
}

impl Comparison {
    /// Whether the candidate may be activated.
    pub fn passes(&self) -> bool {
        self.refused.is_none()
    }
}

/// Held-out judged queries grouped by class, in a stable order.
pub type Classes = BTreeMap<String, Vec<JudgedQuery>>;

/// The class of judged queries stored through the admin API or given to `rankd train`: they
/// carry no class of their own yet.
pub const JUDGMENTS: &str = "judgments";

/// Judged queries of one class, [`JUDGMENTS`].
pub fn one_class(queries: Vec<JudgedQuery>) -> Classes {
    let mut classes = Classes::new();
    if !queries.is_empty() {
        classes.insert(JUDGMENTS.into(), queries);
    }
    classes
}

/// Compares `candidate` with the first phase and with `active` on `held_out`, computing the
/// windows through the engine's rerank path (the default first phase and window, as serving).
pub fn compare_on_index(
    engine: &Engine,
    held_out: &Classes,
    candidate: &ActiveModel,
    active: Option<&ActiveModel>,
) -> Result<Comparison, GuardError> {
    let prf = if candidate.prf() == Prf::Compute || active.is_some_and(|m| m.prf() == Prf::Compute)
    {
        Prf::Compute
    } else {
        Prf::Skip
    };
    let mut windows = BTreeMap::new();
    for (class, queries) in held_out {
        let (w, _) = judged_windows(
            engine,
            queries,
            DEFAULT_FIRST_PHASE,
            DEFAULT_WINDOW,
            prf,
            &|| {},
        )?;
        windows.insert(class.clone(), w);
    }
    let mut comparison = compare(&windows, candidate, active)?;
    // The windows hold this index's similarities; a candidate trained on another embedder's
    // would be served without them (`Engine::dense_serves`), which these windows do not
    // measure: refused, whatever it scores here.
    if let Some(dense) = engine.dense() {
        let index = &dense.index.vectors.model;
        if candidate.reads_dense() && !candidate.reads_dense_of(index) {
            comparison.refused = Some(format!(
                "model {} reads the dense similarity of the embedder with fingerprint {},                  and this index's vectors were computed by another ({index}): train it again                  on these vectors, or compute them with that embedder (`rankd embed                  --embedder DIR`)",
                candidate.id(),
                candidate.embedder().unwrap_or_default(),
            ));
        }
    }
    Ok(comparison)
}

/// Compares on windows already computed (the demo has them from training).
pub fn compare(
    windows: &BTreeMap<String, Vec<Window>>,
    candidate: &ActiveModel,
    active: Option<&ActiveModel>,
) -> Result<Comparison, RerankError> {
    let mut classes = Vec::new();
    for (class, windows) in windows {
        if windows.is_empty() {
            continue;
        }
        let first: Vec<f64> = windows.iter().map(first_phase_rr).collect();
        let cand = windows
            .iter()
            .map(|w| model_rr(w, candidate))
            .collect::<Result<Vec<f64>, _>>()?;
        let act = match active {
            Some(m) => Some(
                windows
                    .iter()
                    .map(|w| model_rr(w, m))
                    .collect::<Result<Vec<f64>, _>>()?,
            ),
            None => None,
        };
        classes.push(ClassComparison {
            class: class.clone(),
            queries: windows.len(),
            first_phase: mean(&first),
            active: act.as_deref().map(mean),
            candidate: mean(&cand),
            vs_first_phase: difference(&cand, &first),
            vs_active: act.as_deref().map(|a| difference(&cand, a)),
        });
    }
    let refused = verdict(&classes, candidate.id(), active.map(ActiveModel::id));
    Ok(Comparison {
        metric: format!("mrr@{CUTOFF}"),
        candidate: candidate.id().to_string(),
        active: active.map(|m| m.id().to_string()),
        classes,
        refused,
    })
}

/// The reason to refuse, naming every class and baseline the candidate loses to.
fn verdict(classes: &[ClassComparison], candidate: &str, active: Option<&str>) -> Option<String> {
    let mut losses = Vec::new();
    for c in classes.iter().filter(|c| c.queries >= MIN_QUERIES) {
        let mut lost = |what: String, baseline: f64, d: &Difference| {
            losses.push(format!(
                "{what} on {} ({} queries): MRR@{CUTOFF} {:.3} against {baseline:.3}, \
                 difference {:+.3}, 95% interval {:+.3} to {:+.3}",
                c.class, c.queries, c.candidate, d.mean, d.low, d.high
            ))
        };
        if c.vs_first_phase.loses() {
            lost(
                format!("worse than the first phase ({DEFAULT_FIRST_PHASE})"),
                c.first_phase,
                &c.vs_first_phase,
            );
        }
        if let (Some(d), Some(score), Some(id)) = (&c.vs_active, c.active, active) {
            if d.loses() {
                lost(format!("worse than the active model {id}"), score, d);
            }
        }
    }
    (!losses.is_empty()).then(|| format!("model {candidate} is {}", losses.join("; ")))
}

/// Splits judged queries into (train, held out): [`HELD_OUT_FRACTION`] of each class whose
/// fraction reaches [`MIN_QUERIES`] (smaller classes all train), chosen by a seeded shuffle of
/// the query ids so the split does not depend on the order the judgments arrived in.
pub fn hold_out(classes: Classes) -> (Vec<JudgedQuery>, Classes) {
    let mut train = Vec::new();
    let mut held = Classes::new();
    for (class, mut queries) in classes {
        queries.sort_by(|a, b| a.qid.cmp(&b.qid));
        let mut rng = ChaCha8Rng::seed_from_u64(SEED);
        rand::seq::SliceRandom::shuffle(queries.as_mut_slice(), &mut rng);
        // A class whose fifth could not refuse a model ([`MIN_QUERIES`]) keeps its queries
        // for training: holding them out would only starve the model.
        let fifth = (queries.len() as f64 * HELD_OUT_FRACTION) as usize;
        let n = if fifth < MIN_QUERIES { 0 } else { fifth };
        let rest = queries.split_off(n);
        train.extend(rest);
        if !queries.is_empty() {
            held.insert(class, queries);
        }
    }
    train.sort_by(|a, b| a.qid.cmp(&b.qid));
    (train, held)
}

/// Reciprocal rank at [`CUTOFF`] of the window in first-phase order.
fn first_phase_rr(w: &Window) -> f64 {
    rr(&w.labels, &(0..w.labels.len()).collect::<Vec<_>>(), CUTOFF)
}

/// Reciprocal rank at [`CUTOFF`] of the window reordered by `model`.
fn model_rr(w: &Window, model: &ActiveModel) -> Result<f64, RerankError> {
    Ok(rr(&w.labels, &model_order(w, model)?, CUTOFF))
}

/// The window's rows in `model`'s order (ties by first-phase rank, as serving breaks them).
fn model_order(w: &Window, model: &ActiveModel) -> Result<Vec<usize>, RerankError> {
    let mut order: Vec<usize> = (0..w.labels.len()).collect();
    if !order.is_empty() {
        let scores = model.score(&w.features)?;
        order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    }
    Ok(order)
}

/// MRR over whole windows (a relevant document outside the window counts as not found) of
/// the first phase's order, or of `model`'s: the demo's held-out known-item measure.
pub fn window_mrr(windows: &[Window], model: Option<&ActiveModel>) -> Result<f64, RerankError> {
    let mut sum = 0.0;
    for w in windows {
        let order = match model {
            Some(m) => model_order(w, m)?,
            None => (0..w.labels.len()).collect(),
        };
        sum += rr(&w.labels, &order, usize::MAX);
    }
    Ok(sum / windows.len().max(1) as f64)
}

fn rr(labels: &[i32], order: &[usize], cutoff: usize) -> f64 {
    let ranking = JudgedRanking {
        retrieved: order
            .iter()
            .take(cutoff)
            .map(|&i| Some(labels[i]))
            .collect(),
        judged: labels.to_vec(),
    };
    reciprocal_rank(&ranking, 1)
}

fn mean(x: &[f64]) -> f64 {
    if x.is_empty() {
        0.0
    } else {
        x.iter().sum::<f64>() / x.len() as f64
    }
}

/// The mean of `a − b` per query and its 95% bootstrap percentile interval.
fn difference(a: &[f64], b: &[f64]) -> Difference {
    let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| x - y).collect();
    let n = d.len();
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let mut means: Vec<f64> = (0..RESAMPLES)
        .map(|_| (0..n).map(|_| d[rng.random_range(0..n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    let at = |q: f64| means[((RESAMPLES as f64 - 1.0) * q).round() as usize];
    Difference {
        mean: mean(&d),
        low: at(0.025),
        high: at(0.975),
    }
}

/// Why a comparison could not be made.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    #[error(transparent)]
    Search(#[from] SearchError),
    #[error(transparent)]
    Model(#[from] RerankError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_brackets_the_mean_and_is_reproducible() {
        let a: Vec<f64> = (0..50)
            .map(|i| if i % 3 == 0 { 1.0 } else { 0.5 })
            .collect();
        let b: Vec<f64> = (0..50)
            .map(|i| if i % 5 == 0 { 1.0 } else { 0.2 })
            .collect();
        let d = difference(&a, &b);
        assert!(d.low <= d.mean && d.mean <= d.high, "{d:?}");
        assert!(d.low > 0.0, "a is better on almost every query: {d:?}");
        assert_eq!(d, difference(&a, &b));
        // The same values both sides: no difference, an interval of zero width.
        let same = difference(&a, &a);
        assert_eq!((same.mean, same.low, same.high), (0.0, 0.0, 0.0));
        assert!(!same.loses());
        assert!(difference(&b, &a).loses());
    }

    #[test]
    fn rr_is_cut_at_ten() {
        let mut labels = vec![0; 20];
        labels[12] = 1;
        assert_eq!(rr(&labels, &(0..20).collect::<Vec<_>>(), CUTOFF), 0.0);
        labels[3] = 1;
        assert_eq!(rr(&labels, &(0..20).collect::<Vec<_>>(), CUTOFF), 0.25);
    }

    #[test]
    fn hold_out_takes_a_fifth_of_each_large_class_whatever_the_order() {
        let q = |i: usize| JudgedQuery {
            qid: format!("q{i}"),
            text: format!("text {i}"),
            grades: Default::default(),
        };
        let mut classes = Classes::new();
        classes.insert("a".into(), (0..50).map(q).collect());
        classes.insert("b".into(), (50..99).map(q).collect());
        classes.insert("c".into(), vec![q(99)]);
        let (train, held) = hold_out(classes.clone());
        assert_eq!(held["a"].len(), 10);
        assert!(
            !held.contains_key("b"),
            "a fifth of 49 could not refuse: all train"
        );
        assert!(!held.contains_key("c"), "a class of one query trains");
        assert_eq!(train.len(), 100 - 10);
        for (_, queries) in classes.iter_mut() {
            queries.reverse();
        }
        assert_eq!(hold_out(classes).1, held);
    }

    /// A model records the embedder of the vectors its windows came from only when it reads
    /// the dense similarity (`super::super::record_embedder`), and the guard refuses one
    /// trained on another embedder's similarities, naming both, whatever it scores on this
    /// index's windows (which hold this index's similarities, not what it would be served).
    #[test]
    fn a_model_of_another_embedders_similarities_is_refused() {
        let (model, _data, index) =
            crate::dense::tests::indexed_with_vectors((0..6).map(|i| crate::corpus::Document {
                id: format!("d{i}"),
                title: "sort the vector".into(),
                body: format!("how do i iterate over a hash map {i}."),
                ..Default::default()
            }));
        let engine = Engine::new(index).with_stored_vectors(None).unwrap();
        let here = super::super::embedder_of(&engine).unwrap();
        assert_eq!(here, crate::dense::fingerprint(model.path()).unwrap());
        let text_only = crate::rerank::testutil::linear_model(&["bm25f"], &[1.0], &[1.0, 2.0]);
        let kept = super::super::record_embedder(text_only.clone(), Some(&here));
        assert_eq!(
            (kept.training.embedder.as_deref(), kept.id()),
            (None, text_only.id())
        );
        let reads = crate::rerank::testutil::linear_model(
            &[crate::features::DENSE_SIMILARITY, "bm25f"],
            &[1.0, 0.5],
            &[0.1, 1.0, 0.0, 10.0],
        );
        let recorded = super::super::record_embedder(reads.clone(), Some(&here));
        assert_eq!(recorded.training.embedder.as_deref(), Some(here.as_str()));
        let held_out: Classes = [(
            "questions".to_string(),
            vec![JudgedQuery {
                qid: "1".into(),
                text: "sort the vector".into(),
                grades: [("d1".to_string(), 1)].into(),
            }],
        )]
        .into();
        let compare = |m: crate::rerank::Reranker| {
            let candidate = ActiveModel::new(m, Default::default()).unwrap();
            compare_on_index(&engine, &held_out, &candidate, None).unwrap()
        };
        let ok = compare(recorded);
        assert!(
            ok.refused
                .as_deref()
                .is_none_or(|r| !r.contains("embedder")),
            "{:?}",
            ok.refused
        );
        let other = "0".repeat(64);
        let refused = compare(reads.with_embedder(other.clone())).refused.unwrap();
        assert!(
            refused.contains(&here) && refused.contains(&other),
            "{refused}"
        );
    }
}
