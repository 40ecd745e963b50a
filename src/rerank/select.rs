//! Model selection on training queries only (SPEC §3.5: hyperparameters "are tuned on a
//! validation split of queries").
//!
//! With ~150 training queries and 70 features (many constant or near-duplicates on a corpus
//! without links), a model over every feature learns noise. [`select`] chooses a feature
//! subset and a weight decay from a small declared grid, looking only at the training set and
//! its validation split:
//!
//! 1. **Screening** on the training part: every feature that varies within some query is ranked
//!    by its training MAP as a ranker on its own, in its better direction
//!    (`max(MAP(x), MAP(−x))`: a linear model can use either sign). Ties keep feature order.
//! 2. **Candidates**: the anchor feature (the first-phase score: reranking starts from it)
//!    plus the top `k` screened features, for each `k` of the grid (capped at the number
//!    screened, so "every screened feature" is always a candidate), times each weight decay.
//! 3. **Choice**: each candidate is trained on the training part with early stopping on the
//!    validation part; [`SelectionRule`] picks one from the validation results (the highest
//!    MAP, or the simplest within one standard error of it), ties going to the earlier
//!    candidate (fewer features, then the earlier weight decay). Its model is returned as is.
//!
//! Nothing else is read, so a caller that passes only training queries (as `rankd cv` does
//! per fold) makes every choice without the held-out queries. Deterministic for a given
//! config seed.

use serde::Serialize;

use super::{evaluate_scores, train, MetricConvention, RankSet, RerankError, TrainConfig};
use super::{EpochLog, TrainOutcome};

/// The declared grid.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectionGrid {
    /// Numbers of screened features added to the anchor.
    pub top_k: Vec<usize>,
    /// Weight decays tried for each feature subset.
    pub weight_decay: Vec<f64>,
    /// Always kept and listed first, if the set has it (e.g. `first_phase.score`).
    pub anchor: Option<String>,
    pub rule: SelectionRule,
}

impl SelectionGrid {
    /// Numbers of screened features tried unless told otherwise: doubling up to 16, then
    /// all of them (on the current feature set).
    pub const DEFAULT_TOP_K: [usize; 6] = [1, 2, 4, 8, 16, 100];
}

/// How the validation results pick a candidate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum SelectionRule {
    /// The highest validation MAP.
    Best,
    /// The one-standard-error rule (Hastie, Tibshirani & Friedman, ESL §7.10; Breiman et al.
    /// 1984): the first (simplest) candidate whose validation MAP is below the best one's by
    /// at most the standard error of their paired per-query AP differences. The maximum over
    /// candidates (and over epochs, by early stopping) of a ~30-query MAP is biased upwards,
    /// the more so the more features a candidate has; this rule does not pay for that noise.
    #[default]
    OneSe,
}

/// One feature's screening score on the training part.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Screened {
    pub feature: String,
    /// Training MAP of the feature alone, in its better direction.
    pub map: f64,
    /// The better direction is descending −x (lower is better, e.g. a rank).
    pub negated: bool,
}

/// One trained candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    pub features: Vec<String>,
    pub weight_decay: f64,
    /// Validation MAP at the kept epoch.
    pub valid_map: f64,
    pub best_epoch: usize,
    /// Validation AP per query with a relevant row (validation query order).
    #[serde(skip)]
    pub valid_ap: Vec<f64>,
}

/// What was chosen and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Selection {
    pub features: Vec<String>,
    pub weight_decay: f64,
    pub valid_map: f64,
    pub rule: SelectionRule,
    /// Constant within every query of the training part (never candidates).
    pub constant: Vec<String>,
    pub screened: Vec<Screened>,
    pub candidates: Vec<Candidate>,
}

/// Ranks the features of `set` that vary within some query by their MAP as single rankers
/// (step 1). Returns the ranking and the names of the features constant within every query.
pub(crate) fn screen(set: &RankSet) -> Result<(Vec<Screened>, Vec<String>), RerankError> {
    let d = set.num_features();
    let (mut screened, mut constant) = (Vec::new(), Vec::new());
    for c in 0..d {
        let column: Vec<f32> = (0..set.num_rows()).map(|r| set.x[r * d + c]).collect();
        // A feature constant within each query (e.g. the query length) cannot reorder any
        // ranking by itself.
        let within_queries = set.queries.iter().all(|q| {
            let values = &column[q.rows.clone()];
            values.iter().all(|&v| v == values[0])
        });
        if within_queries {
            constant.push(set.feature_names[c].clone());
            continue;
        }
        let up = evaluate_scores(set, &column, MetricConvention::Letor)?.map;
        let negated: Vec<f32> = column.iter().map(|v| -v).collect();
        let down = evaluate_scores(set, &negated, MetricConvention::Letor)?.map;
        screened.push(Screened {
            feature: set.feature_names[c].clone(),
            map: up.max(down),
            negated: down > up,
        });
    }
    // Stable: ties keep feature order.
    screened.sort_by(|a, b| b.map.total_cmp(&a.map));
    Ok((screened, constant))
}

/// The set with only the named columns, in that order.
fn columns(set: &RankSet, names: &[String]) -> RankSet {
    let d = set.num_features();
    let cols: Vec<usize> = names
        .iter()
        .map(|n| {
            set.feature_names
                .iter()
                .position(|f| f == n)
                .expect("candidate features come from the set")
        })
        .collect();
    let mut x = Vec::with_capacity(set.num_rows() * cols.len());
    for r in 0..set.num_rows() {
        x.extend(cols.iter().map(|&c| set.x[r * d + c]));
    }
    RankSet {
        feature_names: names.to_vec(),
        x,
        labels: set.labels.clone(),
        queries: set.queries.clone(),
        doc_ids: set.doc_ids.clone(),
    }
}

/// The candidate feature lists of the grid, smallest first, without duplicates (step 2).
fn feature_lists(
    screened: &[Screened],
    grid: &SelectionGrid,
    names: &[String],
) -> Vec<Vec<String>> {
    let anchor = grid.anchor.as_ref().filter(|a| names.contains(a));
    let others: Vec<&String> = screened
        .iter()
        .map(|s| &s.feature)
        .filter(|f| Some(*f) != anchor)
        .collect();
    let mut ks: Vec<usize> = grid.top_k.iter().map(|&k| k.min(others.len())).collect();
    ks.sort_unstable();
    ks.dedup();
    ks.into_iter()
        .map(|k| {
            anchor
                .into_iter()
                .chain(others[..k].iter().copied())
                .cloned()
                .collect()
        })
        .filter(|list: &Vec<String>| !list.is_empty())
        .collect()
}

/// Chooses features and weight decay on `train_set` and `valid_set` (steps 1–3) and returns
/// the choice with the winning model. `observer` sees every epoch of every candidate.
pub fn select(
    train_set: &RankSet,
    valid_set: &RankSet,
    config: &TrainConfig,
    grid: &SelectionGrid,
    observer: &mut dyn FnMut(&EpochLog),
    cancel: &std::sync::atomic::AtomicBool,
) -> Result<(Selection, TrainOutcome), RerankError> {
    if grid.top_k.is_empty() || grid.weight_decay.is_empty() {
        return Err(RerankError::invalid(
            "the selection grid needs at least one k and one weight decay",
        ));
    }
    let (screened, constant) = screen(train_set)?;
    let lists = feature_lists(&screened, grid, &train_set.feature_names);
    if lists.is_empty() {
        return Err(RerankError::invalid(
            "every feature is constant on the training queries: nothing to select",
        ));
    }
    let mut candidates = Vec::new();
    let mut outcomes = Vec::new();
    for features in &lists {
        let (t, v) = (columns(train_set, features), columns(valid_set, features));
        for &weight_decay in &grid.weight_decay {
            let mut config = config.clone();
            config.network.weight_decay = weight_decay;
            let outcome = train(&t, Some(&v), &config, observer, cancel)?;
            let scores = outcome.model.score(&v.x, v.num_rows())?;
            let valid_ap = per_query_ap(&v, &scores)?;
            candidates.push(Candidate {
                features: features.clone(),
                weight_decay,
                valid_map: mean(&valid_ap),
                best_epoch: outcome.model.training.best_epoch,
                valid_ap,
            });
            outcomes.push(outcome);
        }
    }
    let i = choose(&candidates, grid.rule);
    let chosen = &candidates[i];
    Ok((
        Selection {
            features: chosen.features.clone(),
            weight_decay: chosen.weight_decay,
            valid_map: chosen.valid_map,
            rule: grid.rule,
            constant,
            screened,
            candidates: candidates.clone(),
        },
        outcomes.swap_remove(i),
    ))
}

/// AP of each query of `set` that has a relevant row (SPEC §4, over the query's rows).
fn per_query_ap(set: &RankSet, scores: &[f32]) -> Result<Vec<f64>, RerankError> {
    let mut ap = Vec::with_capacity(set.queries.len());
    for (qi, q) in set.queries.iter().enumerate() {
        if set.labels[q.rows.clone()].iter().all(|&l| l < 1) {
            continue;
        }
        let m = evaluate_scores(
            &set.subset(&[qi]),
            &scores[q.rows.clone()],
            MetricConvention::Trec,
        )?;
        ap.push(m.map);
    }
    Ok(ap)
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Step 3: the index of the chosen candidate. Earlier candidates are simpler and win ties.
fn choose(candidates: &[Candidate], rule: SelectionRule) -> usize {
    let mut best = 0;
    for (i, c) in candidates.iter().enumerate() {
        if c.valid_map > candidates[best].valid_map {
            best = i;
        }
    }
    match rule {
        SelectionRule::Best => best,
        SelectionRule::OneSe => {
            let top = &candidates[best].valid_ap;
            candidates
                .iter()
                .position(|c| {
                    let d: Vec<f64> = top.iter().zip(&c.valid_ap).map(|(b, a)| b - a).collect();
                    mean(&d) <= standard_error(&d)
                })
                .unwrap_or(best)
        }
    }
}

/// Standard error of the mean (sample standard deviation / √n; 0 below two values).
fn standard_error(xs: &[f64]) -> f64 {
    let n = xs.len();
    if n < 2 {
        return 0.0;
    }
    let m = mean(xs);
    let var = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64;
    (var / n as f64).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rerank::{Activation, NormKind, Objective, ObjectiveKind, QueryGroup};
    use crate::rerank::{MetricConvention, NetworkParams};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use std::sync::atomic::AtomicBool;

    /// Queries whose labels follow `signal` (column 1) and, less, `rank` (column 2, lower is
    /// better); `anchor` (column 0) is weakly informative, `flat` (3) constant, `noise` (4) noise.
    fn set(queries: usize, seed: u64) -> RankSet {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let names = ["anchor", "signal", "rank", "flat", "noise"]
            .map(String::from)
            .to_vec();
        let (mut x, mut labels, mut groups) = (Vec::new(), Vec::new(), Vec::new());
        for q in 0..queries {
            let start = labels.len();
            for _ in 0..10 {
                let s: f32 = rng.random_range(0.0..1.0);
                let r: f32 = rng.random_range(0.0..1.0);
                labels.push(i32::from(
                    s - 0.3 * r + rng.random_range(-0.1f32..0.1) > 0.5,
                ));
                let anchor = s + rng.random_range(-0.8f32..0.8);
                x.extend([anchor, s, r, 7.0, rng.random_range(0.0f32..1.0)]);
            }
            groups.push(QueryGroup::new(format!("q{q}"), start..labels.len()));
        }
        RankSet::new(names, x, labels, groups, None).unwrap()
    }

    fn config() -> TrainConfig {
        TrainConfig {
            objective: Objective::with_defaults(ObjectiveKind::StableAp, 0.1, 1),
            network: NetworkParams {
                hidden: Vec::new(),
                activation: Activation::Relu,
                norm: NormKind::ZScore,
                lr: 0.05,
                epochs: 10,
                batch: 8,
                patience: 10,
                ..NetworkParams::default()
            },
            gbdt: None,
            seed: 3,
            convention: MetricConvention::Letor,
            source: "synthetic".into(),
            parent: None,
            click_lists: None,
        }
    }

    #[test]
    fn screening_drops_constant_features_and_finds_the_better_direction() {
        let (screened, constant) = screen(&set(40, 1)).unwrap();
        assert_eq!(constant, vec!["flat".to_string()]);
        assert_eq!(screened[0].feature, "signal");
        assert!(!screened[0].negated);
        let rank = screened.iter().find(|s| s.feature == "rank").unwrap();
        assert!(rank.negated, "lower rank values are better: {screened:?}");
        assert_eq!(screened.last().unwrap().feature, "noise");
        assert!(screened.windows(2).all(|w| w[0].map >= w[1].map));
    }

    fn candidate(valid_ap: Vec<f64>) -> Candidate {
        Candidate {
            features: Vec::new(),
            weight_decay: 0.0,
            valid_map: mean(&valid_ap),
            best_epoch: 1,
            valid_ap,
        }
    }

    #[test]
    fn per_query_ap_skips_queries_without_a_relevant_row() {
        let q = |qid: &str, rows| QueryGroup::new(qid, rows);
        // q1: relevant row ranked second (AP 1/2); q2: nothing relevant.
        let set = RankSet::new(
            vec!["f".into()],
            vec![0.0; 4],
            vec![0, 1, 0, 0],
            vec![q("q1", 0..2), q("q2", 2..4)],
            None,
        )
        .unwrap();
        assert_eq!(
            per_query_ap(&set, &[2.0, 1.0, 1.0, 0.0]).unwrap(),
            vec![0.5]
        );
    }

    #[test]
    fn one_se_rule_takes_the_simplest_candidate_within_a_standard_error() {
        // Differences to the best (third): first 0.2, 0.2, 0.2, 0.2 (mean 0.2 > SE 0);
        // second 0.1, −0.1, 0.1, −0.1 + 0.04 each: mean 0.04, SE of (0.14, −0.06, 0.14,
        // −0.06) = sd 0.11547 / 2 = 0.0577 ≥ 0.04.
        let best = vec![0.8, 0.6, 0.8, 0.6];
        let first = best.iter().map(|b| b - 0.2).collect();
        let second = vec![0.66, 0.66, 0.66, 0.66];
        let candidates = vec![candidate(first), candidate(second), candidate(best)];
        assert_eq!(choose(&candidates, SelectionRule::Best), 2);
        assert_eq!(choose(&candidates, SelectionRule::OneSe), 1);
        assert!((standard_error(&[0.14, -0.06, 0.14, -0.06]) - 0.057735).abs() < 1e-6);
        // A lone best candidate is chosen by both rules.
        assert_eq!(choose(&candidates[2..], SelectionRule::OneSe), 0);
    }

    #[test]
    fn candidates_start_from_the_anchor_and_grow_by_screening_order() {
        let data = set(40, 1);
        let (screened, _) = screen(&data).unwrap();
        let grid = SelectionGrid {
            top_k: vec![100, 1, 0, 1],
            weight_decay: vec![0.0],
            anchor: Some("anchor".into()),
            rule: SelectionRule::Best,
        };
        let lists = feature_lists(&screened, &grid, &data.feature_names);
        let names = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            lists,
            vec![
                names(&["anchor"]),
                names(&["anchor", "signal"]),
                names(&["anchor", "signal", "rank", "noise"]),
            ]
        );
        // The chosen model reads exactly the chosen columns, and beats the anchor alone.
        let (t, v) = data.split_validation(0.25, 1).unwrap();
        let run = || {
            select(
                &t,
                &v,
                &config(),
                &grid,
                &mut |_| {},
                &AtomicBool::new(false),
            )
            .unwrap()
        };
        let (sel, outcome) = run();
        assert_eq!(outcome.model.feature_names, sel.features);
        assert_eq!(sel.candidates.len(), 3);
        assert!(sel.features.contains(&"signal".to_string()), "{sel:?}");
        assert!(sel.valid_map >= sel.candidates[0].valid_map);
        // Deterministic for a seed.
        let (again, _) = run();
        assert_eq!(sel, again);
    }
}
