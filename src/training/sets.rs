//! The training and validation sets of a model trained on the index, from judged queries, the
//! server's logged clicks, or both: what `rankd train` and `POST /admin/train` train on, built
//! once here so the two cannot drift apart.
//!
//! - With `hold_out`, the activation guard's queries (`guard::hold_out`: a fifth of each class
//!   big enough) are taken out first; click queries form their own class, [`CLICKS`], labelled
//!   by their clicks (`ClickQuery::judged`).
//! - Judged queries give their first-phase windows with graded labels, split by query into
//!   training and validation.
//! - Click queries give inverse-propensity weighted groups ([`super::clicks::click_sets`]), or
//!   with pairwise debiasing groups that learn from their logged lists ([`IndexSets::click_lists`],
//!   unbiased LambdaMART).
//! - Both together: the two training sets one after the other, and the two validation sets.
//!   A judged query weighs 1; a click group weighs its clicks divided by their propensities,
//!   so the more the users clicked, the more the clicks count.

use serde::Serialize;

use super::clicks::{click_sets, ClickOptions, ClickQuery, ClickStats, CLICKS, CLICK_QID_PREFIX};
use super::guard::{self, Classes};
use super::{judged_windows, rank_set_columns, JudgedQuery, WindowStats};
use crate::rerank::RankSet;
use crate::search::Engine;
use crate::text::ModelKind;

/// Where a model trained on the index learns from.
pub struct Sources {
    /// Judged queries (stored judgments, qrels...).
    pub judged: Vec<JudgedQuery>,
    /// Logged click queries and how their clicks are weighted.
    pub clicks: Option<(Vec<ClickQuery>, ClickOptions)>,
}

/// How the sets are built.
pub struct SetOptions<'a> {
    pub first_phase: ModelKind,
    pub window: usize,
    /// Feature-set columns to train on.
    pub columns: &'a [usize],
    /// Hold out the activation guard's queries.
    pub hold_out: bool,
    pub valid_fraction: f64,
    pub seed: u64,
}

/// The sets, and what went into them.
pub struct IndexSets {
    pub train: RankSet,
    /// With pairwise debiasing: the click groups' logged lists (shown order and clicks per
    /// page), by group qid, for [`crate::rerank::TrainConfig::click_lists`]; the trees learn
    /// those groups from them instead of from their labels.
    pub click_lists: Option<crate::rerank::gbdt::train::unbiased::ClickLists>,
    /// `None` only when clicks alone train and the validation queries drew no click.
    pub valid: Option<RankSet>,
    /// The guard's held-out queries by class (empty without `hold_out`).
    pub held_out: Classes,
    pub report: SetsReport,
}

/// What the sets were built from, for logs and `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct SetsReport {
    /// The judged queries' windows (absent without judged queries).
    pub judged: Option<WindowStats>,
    /// The clicks (absent without clicks).
    pub clicks: Option<ClickStats>,
    pub held_out: usize,
}

/// Builds the sets (see the module doc); `progress` is called once per query whose window is
/// computed.
pub fn index_sets(
    engine: &Engine,
    sources: Sources,
    options: &SetOptions,
    progress: &(dyn Fn() + Sync),
) -> anyhow::Result<IndexSets> {
    let mut classes = guard::one_class(sources.judged);
    let (logged, click_options) = match sources.clicks {
        Some((logged, o)) => (logged, Some(o)),
        None => (Vec::new(), None),
    };
    // Only queries with a click can tell a better ranking from a worse one; the others
    // still train (their pages tell the propensities what users skip).
    let with_clicks: Vec<JudgedQuery> = logged
        .iter()
        .filter(|q| q.clicks() > 0)
        .map(ClickQuery::judged)
        .collect();
    if !with_clicks.is_empty() {
        classes.insert(CLICKS.into(), with_clicks);
    }
    let (training, held_out) = if options.hold_out {
        guard::hold_out(classes)
    } else {
        (classes.into_values().flatten().collect(), Classes::new())
    };
    let judged: Vec<JudgedQuery> = training
        .into_iter()
        .filter(|q| !q.qid.starts_with(CLICK_QID_PREFIX))
        .collect();
    let held: std::collections::HashSet<&str> = held_out
        .get(CLICKS)
        .into_iter()
        .flatten()
        .map(|q| q.qid.as_str())
        .collect();
    let logged: Vec<ClickQuery> = logged
        .into_iter()
        .filter(|q| !held.contains(q.qid.as_str()))
        .collect();
    let (mut train, mut valid) = (Vec::new(), Vec::new());
    let mut click_lists = None;
    let mut report = SetsReport {
        judged: None,
        clicks: None,
        held_out: held_out.values().map(Vec::len).sum(),
    };
    if !judged.is_empty() {
        let prf = crate::features::FeatureSet::current().prf_for(options.columns);
        let (windows, stats) = judged_windows(
            engine,
            &judged,
            options.first_phase,
            options.window,
            prf,
            progress,
        )?;
        let all = rank_set_columns(&windows, options.columns)?;
        let (t, v) = all.split_validation(options.valid_fraction, options.seed)?;
        train.push(t);
        valid.push(v);
        report.judged = Some(stats);
    }
    if let Some(click_options) = click_options {
        let sets = click_sets(
            engine,
            &logged,
            options.first_phase,
            options.window,
            options.columns,
            click_options,
            options.valid_fraction,
            options.seed,
            progress,
        )?;
        train.push(sets.train);
        valid.extend(sets.valid);
        report.clicks = Some(sets.stats);
        click_lists = sets.lists;
    }
    Ok(IndexSets {
        train: RankSet::concat(&train)?,
        valid: (!valid.is_empty())
            .then(|| RankSet::concat(&valid))
            .transpose()?,
        click_lists,
        held_out,
        report,
    })
}
