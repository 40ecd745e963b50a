//! k-fold cross-validation of the reranker on judged windows (SPEC §3.5). Queries are split
//! into folds; for each fold a model is trained on the other folds' windows (with a
//! validation split of them for early stopping and, with a selection grid, for choosing
//! features and weight decay: `rerank::select`) and reranks the held-out fold's windows. The
//! reranked run and the first-phase run over the same windows are scored per query, and a
//! paired randomization test says whether the difference is more than chance. The result is
//! a [`CvReport`]; printing it is the front end's business.

use std::sync::atomic::AtomicBool;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::{project, rank_set_named, TrainSettings, Window};
use crate::error::Invalid;
use crate::eval::significance::{paired_randomization, PairedTest};
use crate::eval::{self, EvalOptions, Qrels, Report, Run};
use crate::features::FeatureSet;
use crate::rerank::select::{select, Selection, SelectionGrid};
use crate::rerank::{MetricConvention, TrainOutcome};

/// Folds of a cross-validation unless told otherwise (SPEC §3.5).
pub(crate) const DEFAULT_FOLDS: usize = 5;

/// What a cross-validation runs.
#[derive(Debug, Clone)]
pub(crate) struct CvPlan {
    pub folds: usize,
    pub settings: TrainSettings,
    /// Feature-set columns the models train on, and their names.
    pub columns: Vec<usize>,
    /// Single features that also rank every window (no training), by name and column.
    pub single_features: Vec<(String, usize)>,
    /// Model selection inside each fold.
    pub grid: Option<SelectionGrid>,
    pub eval: EvalOptions,
    /// Random sign assignments of the significance tests.
    pub samples: u64,
}

/// One fold's outcome.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FoldReport {
    pub fold: usize,
    pub test_queries: usize,
    pub best_epoch: usize,
    pub epochs_run: usize,
    pub selection: Option<Selection>,
}

/// A single feature's ranking against the first phase.
#[derive(Debug, Clone)]
pub(crate) struct SingleFeature {
    pub name: String,
    pub report: Report,
    pub significance: Vec<(String, PairedTest)>,
}

/// The result of a cross-validation.
#[derive(Debug, Clone)]
pub(crate) struct CvReport {
    pub folds: Vec<FoldReport>,
    /// The first phase's ranking of every window, and the cross-validated reranked one.
    pub baseline: Report,
    pub reranked: Report,
    /// Every query scored by the model of the fold that held it out.
    pub reranked_run: Run,
    /// Reranked against the first phase, per metric (map, ndcg@10, mrr).
    pub significance: Vec<(String, PairedTest)>,
    pub single_features: Vec<SingleFeature>,
}

/// The metrics the paired tests compare.
const TESTED: [&str; 3] = ["map", "ndcg@10", "mrr"];

/// Cross-validates `plan` over `windows` judged by `qrels`.
pub(crate) fn cross_validate(
    windows: &[Window],
    qrels: &Qrels,
    plan: &CvPlan,
    on_fold: &mut dyn FnMut(&FoldReport),
) -> anyhow::Result<CvReport> {
    if plan.folds < 2 {
        return Err(Invalid(format!("folds must be at least 2, got {}", plan.folds)).into());
    }
    if windows.len() < plan.folds {
        return Err(Invalid(format!(
            "{} judged queries cannot make {} folds",
            windows.len(),
            plan.folds
        ))
        .into());
    }
    plan.settings.validate()?;
    let set = FeatureSet::current();
    let names: Vec<String> = plan
        .columns
        .iter()
        .map(|&c| set.names()[c].clone())
        .collect();
    let fold_of = assign_folds(windows.len(), plan.folds, plan.settings.seed);
    let score_col = set
        .get("first_phase.score")
        .expect("the feature set has the first-phase score");
    let (mut baseline, mut reranked) = (Run::new(), Run::new());
    let mut folds = Vec::new();
    for fold in 0..plan.folds {
        let trained = train_fold(windows, &fold_of, fold, plan, &names)?;
        let model = &trained.outcome.model;
        let cols: Vec<usize> = model
            .feature_names()
            .iter()
            .map(|n| set.get(n).expect("the model reads features of the set"))
            .collect();
        let mut test_queries = 0;
        for w in windows
            .iter()
            .zip(&fold_of)
            .filter(|(_, &f)| f == fold)
            .map(|(w, _)| w)
        {
            test_queries += 1;
            let x = project(w, &cols).features;
            let scores = model.score(&x.values, x.rows)?;
            for (row, id) in w.ids.iter().enumerate() {
                baseline.push(
                    &w.qid,
                    id.clone(),
                    f64::from(w.features.row(row)[score_col]),
                );
                reranked.push(&w.qid, id.clone(), f64::from(scores[row]));
            }
        }
        let report = FoldReport {
            fold: fold + 1,
            test_queries,
            best_epoch: model.training.best_epoch,
            epochs_run: model.training.epochs_run,
            selection: trained.selection,
        };
        on_fold(&report);
        folds.push(report);
    }
    let base = eval::evaluate(&baseline, qrels, &plan.eval)?;
    let rer = eval::evaluate(&reranked, qrels, &plan.eval)?;
    let seed = plan.settings.seed;
    let against_base = |other: &Report| -> Vec<(String, PairedTest)> {
        TESTED
            .into_iter()
            .map(|m| (m.to_string(), paired(&base, other, m, plan.samples, seed)))
            .collect()
    };
    let significance = against_base(&rer);
    // Single features rank every window (ties as trec_eval breaks them, like the reranked run).
    let mut single_features = Vec::new();
    for (name, col) in &plan.single_features {
        let mut run = Run::new();
        for w in windows {
            for (row, id) in w.ids.iter().enumerate() {
                run.push(&w.qid, id.clone(), f64::from(w.features.row(row)[*col]));
            }
        }
        let report = eval::evaluate(&run, qrels, &plan.eval)?;
        let significance = against_base(&report);
        single_features.push(SingleFeature {
            name: name.clone(),
            report,
            significance,
        });
    }
    Ok(CvReport {
        folds,
        baseline: base,
        reranked: rer,
        reranked_run: reranked,
        significance,
        single_features,
    })
}

/// Folds by query, shuffled with the seed: window `i` belongs to fold `fold_of[i]`.
fn assign_folds(n: usize, folds: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    let mut fold_of = vec![0; n];
    for (i, &w) in order.iter().enumerate() {
        fold_of[w] = i % folds;
    }
    fold_of
}

/// One fold's model and, with a selection grid, what was selected.
struct FoldModel {
    outcome: TrainOutcome,
    selection: Option<Selection>,
}

/// Trains the model of `fold` as `plan` says: on the windows of the other folds (the plan's
/// columns, named `names`), with a seeded validation split of them for early stopping and,
/// with the plan's grid, for model selection. The windows of `fold` itself are not read.
fn train_fold(
    windows: &[Window],
    fold_of: &[usize],
    fold: usize,
    plan: &CvPlan,
    names: &[String],
) -> anyhow::Result<FoldModel> {
    let settings = &plan.settings;
    let train: Vec<Window> = windows
        .iter()
        .zip(fold_of)
        .filter(|(_, &f)| f != fold)
        .map(|(w, _)| project(w, &plan.columns))
        .collect();
    let train_set = rank_set_named(&train, names.to_vec())?;
    let (t, v) = train_set.split_validation(settings.valid_fraction, settings.seed)?;
    let source = format!("cv fold {} of {}", fold + 1, plan.folds);
    let config = settings.config(source, MetricConvention::Letor);
    let cancel = AtomicBool::new(false);
    match &plan.grid {
        None => Ok(FoldModel {
            outcome: crate::rerank::train(&t, Some(&v), &config, &mut |_| {}, &cancel)?,
            selection: None,
        }),
        Some(grid) => {
            let (selection, outcome) = select(&t, &v, &config, grid, &mut |_| {}, &cancel)?;
            Ok(FoldModel {
                outcome,
                selection: Some(selection),
            })
        }
    }
}

/// Paired test of one metric over the queries both reports scored.
fn paired(a: &Report, b: &Report, metric: &str, samples: u64, seed: u64) -> PairedTest {
    let metric = match metric {
        "map" => "ap",
        "mrr" => "rr",
        m => m,
    };
    let (xs, ys): (Vec<f64>, Vec<f64>) = a
        .per_query
        .iter()
        .filter_map(|(q, m)| Some((m.get(metric)?, b.per_query.get(q)?.get(metric)?)))
        .unzip();
    paired_randomization(&xs, &ys, samples, seed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::FeatureMatrix;
    use crate::training::ModelChoice;
    use rand::Rng;

    /// Windows of 10 rows over `first_phase.score` (weak), `signal` (strong), `flat`
    /// (constant) and `noise`.
    fn windows(queries: usize) -> (Vec<Window>, Vec<String>) {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let names = ["first_phase.score", "signal", "flat", "noise"].map(String::from);
        let windows = (0..queries)
            .map(|q| {
                let (mut values, mut labels) = (Vec::new(), Vec::new());
                for _ in 0..10 {
                    let s: f32 = rng.random_range(0.0..1.0);
                    labels.push(i32::from(s + rng.random_range(-0.1f32..0.1) > 0.6));
                    let fp = s + rng.random_range(-0.7f32..0.7);
                    values.extend([fp, s, 1.0, rng.random_range(0.0f32..1.0)]);
                }
                Window {
                    qid: format!("q{q}"),
                    features: FeatureMatrix {
                        rows: 10,
                        cols: 4,
                        values,
                    },
                    ids: (0..10).map(|d| format!("d{d}")).collect(),
                    labels,
                }
            })
            .collect();
        (windows, names.to_vec())
    }

    fn flip_labels(windows: &mut [Window], fold_of: &[usize], fold: usize) {
        for (w, _) in windows.iter_mut().zip(fold_of).filter(|(_, &f)| f == fold) {
            for l in &mut w.labels {
                *l = 1 - *l;
            }
        }
    }

    #[test]
    fn folds_partition_the_queries_evenly() {
        let f = assign_folds(23, 5, 7);
        for fold in 0..5 {
            let n = f.iter().filter(|&&x| x == fold).count();
            assert!(n == 4 || n == 5, "fold {fold} has {n}");
        }
        assert_eq!(f, assign_folds(23, 5, 7), "seeded");
        assert_ne!(f, assign_folds(23, 5, 8));
    }

    #[test]
    fn selection_uses_only_the_training_folds() {
        let (ws, names) = windows(45);
        let fold_of: Vec<usize> = (0..ws.len()).map(|i| i % 3).collect();
        let mut settings = TrainSettings {
            model: ModelChoice::Linear,
            ..TrainSettings::letor_network()
        };
        settings.network.epochs = 15;
        settings.network.patience = 15;
        settings.network.lr = 0.05;
        let grid = SelectionGrid {
            top_k: vec![0, 1, 8],
            weight_decay: vec![4e-5, 1e-2],
            anchor: Some("first_phase.score".into()),
            rule: crate::rerank::select::SelectionRule::OneSe,
        };
        let plan = CvPlan {
            folds: 3,
            settings,
            columns: vec![0, 1, 2, 3],
            single_features: Vec::new(),
            grid: Some(grid),
            eval: EvalOptions::default(),
            samples: 0,
        };
        let fit = |ws: &[Window]| train_fold(ws, &fold_of, 0, &plan, &names).unwrap();
        let original = fit(&ws);
        let selection = original.selection.clone().unwrap();
        assert_eq!(selection.constant, vec!["flat".to_string()]);
        assert_eq!(selection.candidates.len(), 6);
        assert!(selection.features.contains(&"signal".to_string()));

        // Inverting every label of the held-out fold changes nothing.
        let mut test_flipped = ws.clone();
        flip_labels(&mut test_flipped, &fold_of, 0);
        let same = fit(&test_flipped);
        assert_eq!(same.selection, original.selection);
        assert_eq!(same.outcome.model.networks, original.outcome.model.networks);
        assert_eq!(
            same.outcome.model.normalization,
            original.outcome.model.normalization
        );

        // Control: inverting a training fold's labels does change the selection.
        let mut train_flipped = ws.clone();
        flip_labels(&mut train_flipped, &fold_of, 1);
        assert_ne!(fit(&train_flipped).selection, original.selection);
    }
}
