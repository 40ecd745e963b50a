//! Training data from the server's own click log: the first pages `/search` logged and the
//! clicks `POST /events` reported on them (`Db::first_page_sessions`) become inverse-propensity
//! weighted training groups over the index's first-phase windows, the construction
//! `rankd eval-letor --train-clicks` measures on LETOR data (`crate::user_clicks::ips`; the weighting
//! in SPEC terms: docs/EVALUATION.md, "Learning from clicks").
//!
//! - **Queries** are the logged query texts, with case and runs of white space folded (the
//!   analyser folds them too, so the texts retrieve the same window). Each becomes one query of
//!   the data set, its id `clicks:` and the folded text.
//! - **Rows** are the query's first-phase window on the index as it is now, with the features
//!   serving computes ([`super::judged_windows`]), so a model trained here reranks what it will
//!   be served. A logged page is matched to the window by document id; a page is kept up to its
//!   first document the window no longer holds (a deleted or since-outranked document): the
//!   ranks before it are the ranks the user saw, the ones after it would be shifted. The clicks
//!   cut off that way are counted ([`ClickStats::clicks_outside_window`]).
//! - **Propensities** come from the position-based model fitted to the kept pages by EM
//!   (`crate::user_clicks::ips::estimate_propensities`), relative to rank 1: no simulator's truth is
//!   needed, and it is what measured best on LETOR (docs/EVALUATION.md). The model can only
//!   tell examination from attraction when documents were shown at more than one rank (a
//!   ranking that changed, a second model, interleaving, a randomised share of first pages:
//!   `[events] swap_share`, `crate::events::rand_pair`): from
//!   pages that never vary its examination estimates are arbitrary. How many (query,
//!   document) pairs were seen at several ranks is reported
//!   ([`ClickStats::pairs_at_several_ranks`]), and the front ends warn when none was. On a
//!   randomised log of the test fixture the estimates are within 0.05 of the simulated 1/rank
//!   (`tests/suite/train_index.rs`, `train_from_logged_clicks`).
//! - **The activation guard** needs graded queries the model did not train on; for clicks it
//!   holds out a fifth of the click queries, each with every document clicked on one of its
//!   pages as relevant ([`ClickQuery::judged`]). Those labels carry the logger's position bias,
//!   which favours the ranking that was serving when the clicks were logged: a guard on them
//!   errs towards keeping what serves, the side a guard should err on.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::{judged_windows, rank_set_columns, JudgedQuery, Window};
use crate::db::events::ClickedPage;
use crate::error::Invalid;
use crate::rerank::gbdt::train::unbiased::ClickLists;
use crate::search::Engine;
use crate::text::ModelKind;
use crate::user_clicks::ips::{
    click_set, estimate_noise_floor, estimate_propensities, ClickLabels, ClickSet, Debias,
    NoiseFloor, PropensityModel, PROPENSITY_ITERATIONS,
};
use crate::user_clicks::sessions::RowSession;

/// The prefix of a click query's id, which keeps click queries apart from judged ones when both
/// train one model.
pub const CLICK_QID_PREFIX: &str = "clicks:";

/// The activation guard's class of held-out click queries.
pub const CLICKS: &str = "clicks";

/// One logged query text and the first pages shown for it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClickQuery {
    /// `clicks:` and the folded text.
    pub qid: String,
    /// The text as first logged.
    pub text: String,
    /// The pages: document ids in the order shown, and which were clicked.
    pub pages: Vec<(Vec<String>, Vec<bool>)>,
}

impl ClickQuery {
    /// The query with every document clicked on one of its pages graded 1: the activation
    /// guard's labels (see the module doc).
    pub fn judged(&self) -> JudgedQuery {
        let mut grades = HashMap::new();
        for (shown, clicked) in &self.pages {
            for (id, _) in shown.iter().zip(clicked).filter(|(_, &c)| c) {
                grades.insert(id.clone(), 1);
            }
        }
        JudgedQuery {
            qid: self.qid.clone(),
            text: self.text.clone(),
            grades,
        }
    }

    /// Clicks over all its pages.
    pub fn clicks(&self) -> usize {
        self.pages
            .iter()
            .map(|(_, c)| c.iter().filter(|&&c| c).count())
            .sum()
    }
}

/// The logged pages grouped by folded query text, in order of the texts' first page; texts
/// that fold to nothing are left out.
pub fn click_queries(pages: Vec<ClickedPage>) -> Vec<ClickQuery> {
    let mut queries: Vec<ClickQuery> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    for page in pages {
        let folded = page
            .query
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase();
        if folded.is_empty() || page.shown.is_empty() {
            continue;
        }
        let i = *at.entry(folded.clone()).or_insert_with(|| {
            queries.push(ClickQuery {
                qid: format!("{CLICK_QID_PREFIX}{folded}"),
                text: page.query.trim().to_string(),
                pages: Vec::new(),
            });
            queries.len() - 1
        });
        queries[i].pages.push((page.shown, page.clicked));
    }
    queries
}

/// How clicks become training groups.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClickOptions {
    pub debias: Debias,
    /// Graded groups (one per query, click rates as labels) or binary ones (one per clicked
    /// document); unbiased LambdaMART learns from the logged lists either way.
    pub labels: ClickLabels,
    /// The smallest propensity a click is divided by.
    pub propensity_clip: f64,
    /// With IPS: whether the click-noise floor, estimated from the pages, is subtracted from
    /// every impression (the affine correction, `crate::user_clicks::ips`).
    pub noise_floor: NoiseFloor,
}

impl Default for ClickOptions {
    fn default() -> Self {
        ClickOptions {
            debias: Debias::Ips,
            labels: crate::user_clicks::ips::DEFAULT_CLICK_LABELS,
            propensity_clip: crate::user_clicks::ips::DEFAULT_PROPENSITY_CLIP,
            noise_floor: crate::user_clicks::ips::DEFAULT_NOISE_FLOOR,
        }
    }
}

/// What went into a click training set, for the job log and `--json`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ClickStats {
    /// Click queries trained on, and their logged first pages.
    pub queries: usize,
    pub pages: usize,
    /// Clicks on those pages, and those cut off with a document the window no longer holds.
    pub clicks: usize,
    pub clicks_outside_window: usize,
    /// Clicks whose rank's propensity was below the clip.
    pub clipped: usize,
    /// With the noise floor: its estimate (on the scale of clicks over propensities, relative
    /// to rank 1), subtracted from every impression; and the clicked documents left out because
    /// it explains all their clicks.
    pub noise_floor: Option<f64>,
    pub below_floor: usize,
    /// (Query, document) pairs shown at two ranks or more: what lets the click model separate
    /// examination from attraction (none: the propensities are not identified).
    pub pairs_at_several_ranks: usize,
    pub debias: Debias,
    /// How the clicks became groups (null with pairwise debiasing).
    pub click_labels: Option<ClickLabels>,
    /// Examination probability by rank relative to rank 1 (index 0: rank 1); empty without
    /// debiasing.
    pub propensities: Vec<f64>,
    /// Training groups (one per query with a click with graded labels, one per clicked
    /// document with binary ones) in the training and validation parts.
    pub train_groups: usize,
    pub valid_groups: usize,
}

impl ClickStats {
    /// What the user should know before trusting the propensities, if anything.
    pub fn warning(&self) -> Option<String> {
        (self.debias == Debias::Ips && self.pairs_at_several_ranks == 0).then(|| {
            "no logged document was shown at two different ranks, so the propensities cannot \
             be told from the documents' attraction and are not reliable; randomise a share \
             of the first pages (`[events] swap_share`, e.g. 0.05) and log more, or train with \
             debias none"
                .to_string()
        })
    }
}

/// Click training and validation sets over the feature-set columns `columns`.
#[derive(Debug, Clone)]
pub struct ClickSets {
    pub train: crate::rerank::RankSet,
    /// With pairwise debiasing: the training groups' logged lists.
    pub lists: Option<ClickLists>,
    /// `None` when the validation queries drew no click.
    pub valid: Option<crate::rerank::RankSet>,
    pub stats: ClickStats,
}

/// Builds the click training sets of `queries` (see the module doc): their `first_phase`
/// windows of `window` documents, the pages matched to them, propensities from those pages,
/// and `valid_fraction` of the queries (seeded by `seed`) held out as validation groups.
/// `progress` is called once per query.
#[allow(clippy::too_many_arguments)]
pub fn click_sets(
    engine: &Engine,
    queries: &[ClickQuery],
    first_phase: ModelKind,
    window: usize,
    columns: &[usize],
    options: ClickOptions,
    valid_fraction: f64,
    seed: u64,
    progress: &(dyn Fn() + Sync),
) -> anyhow::Result<ClickSets> {
    let clicked: Vec<&ClickQuery> = queries.iter().filter(|q| q.clicks() > 0).collect();
    if clicked.is_empty() {
        return Err(Invalid(format!(
            "none of the {} logged queries has a click on its first page: nothing to learn from",
            queries.len()
        ))
        .into());
    }
    let unjudged: Vec<JudgedQuery> = queries
        .iter()
        .map(|q| JudgedQuery {
            qid: q.qid.clone(),
            text: q.text.clone(),
            grades: HashMap::new(),
        })
        .collect();
    let prf = crate::features::FeatureSet::current().prf_for(columns);
    let (windows, _) = judged_windows(engine, &unjudged, first_phase, window, prf, progress)?;
    let (sessions, cut) = row_sessions(queries, &windows);
    let all = rank_set_columns(&windows, columns)?;
    let propensities = match options.debias {
        Debias::Ips => {
            estimate_propensities(&sessions, &all, PropensityModel::Pbm, PROPENSITY_ITERATIONS)?
        }
        Debias::Pairwise | Debias::None => Vec::new(),
    };
    let floor = (options.debias == Debias::Ips && options.noise_floor == NoiseFloor::Estimate)
        .then(|| estimate_noise_floor(&sessions, &propensities));
    let build = |set, debias| {
        click_set(
            set,
            &sessions,
            debias,
            options.labels,
            &propensities,
            options.propensity_clip,
            floor.unwrap_or(0.0),
        )
    };
    // Validation reads labels: unbiased LambdaMART's are validated on the clicked documents'
    // groups, unweighted.
    let valid_debias = match options.debias {
        Debias::Pairwise => Debias::None,
        other => other,
    };
    let (train, valid) = if all.queries.len() >= 2 {
        let (t, v) = all.split_validation(valid_fraction, seed)?;
        // A validation part without a click has nothing to stop early on; training goes on
        // without one rather than failing.
        (build(&t, options.debias)?, build(&v, valid_debias).ok())
    } else {
        (build(&all, options.debias)?, None)
    };
    let parts = || std::iter::once(&train).chain(valid.as_ref());
    let stats = ClickStats {
        queries: all.queries.len(),
        pages: sessions.len(),
        clicks: parts().map(|p: &ClickSet| p.clicks).sum::<usize>() + cut,
        clicks_outside_window: cut,
        clipped: parts().map(|p| p.clipped).sum(),
        noise_floor: floor,
        below_floor: parts().map(|p| p.below_floor).sum(),
        pairs_at_several_ranks: pairs_at_several_ranks(&sessions),
        debias: options.debias,
        click_labels: (options.debias != Debias::Pairwise).then_some(options.labels),
        propensities,
        train_groups: train.set.queries.len(),
        valid_groups: valid.as_ref().map_or(0, |v| v.set.queries.len()),
    };
    Ok(ClickSets {
        lists: train.lists,
        train: train.set,
        valid: valid.map(|v| v.set),
        stats,
    })
}

/// (Query, row) pairs shown at two ranks or more.
fn pairs_at_several_ranks(sessions: &[RowSession]) -> usize {
    let mut ranks: HashMap<(&str, usize), usize> = HashMap::new();
    let mut several = std::collections::HashSet::new();
    for s in sessions {
        for (k, &row) in s.shown.iter().enumerate() {
            let first = *ranks.entry((s.qid.as_str(), row)).or_insert(k);
            if first != k {
                several.insert((s.qid.as_str(), row));
            }
        }
    }
    several.len()
}

/// The pages as sessions over their query's window rows, each cut at its first document the
/// window lacks; and the clicks cut off.
fn row_sessions(queries: &[ClickQuery], windows: &[Window]) -> (Vec<RowSession>, usize) {
    let rows: BTreeMap<&str, HashMap<&str, usize>> = windows
        .iter()
        .map(|w| {
            let ids = w.ids.iter().enumerate().map(|(r, id)| (id.as_str(), r));
            (w.qid.as_str(), ids.collect())
        })
        .collect();
    let mut sessions = Vec::new();
    let mut cut = 0;
    for q in queries {
        let Some(rows) = rows.get(q.qid.as_str()) else {
            continue;
        };
        for (shown, clicked) in &q.pages {
            let kept = shown
                .iter()
                .take_while(|id| rows.contains_key(id.as_str()))
                .count();
            cut += clicked[kept..].iter().filter(|&&c| c).count();
            if kept == 0 {
                continue;
            }
            let shown: Vec<usize> = shown[..kept].iter().map(|id| rows[id.as_str()]).collect();
            let clicks = shown
                .iter()
                .zip(clicked)
                .filter(|(_, &c)| c)
                .map(|(&r, _)| r)
                .collect();
            sessions.push(RowSession {
                qid: q.qid.clone(),
                shown,
                clicks,
            });
        }
    }
    (sessions, cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(query: &str, shown: &[&str], clicked: &[bool]) -> ClickedPage {
        ClickedPage {
            query: query.into(),
            shown: shown.iter().map(|s| s.to_string()).collect(),
            clicked: clicked.to_vec(),
        }
    }

    #[test]
    fn pages_group_by_folded_text_and_judge_their_clicks() {
        let queries = click_queries(vec![
            page("Hash  Map", &["a", "b"], &[false, true]),
            page("  ", &["a"], &[true]),
            page("vec", &["c"], &[false]),
            page("hash map", &["b", "c"], &[false, true]),
        ]);
        assert_eq!(queries.len(), 2);
        assert_eq!(queries[0].qid, "clicks:hash map");
        assert_eq!(queries[0].text, "Hash  Map");
        assert_eq!(queries[0].pages.len(), 2);
        let judged = queries[0].judged();
        let mut relevant: Vec<&str> = judged.grades.keys().map(String::as_str).collect();
        relevant.sort_unstable();
        assert_eq!(relevant, ["b", "c"]);
        assert!(queries[1].judged().grades.is_empty());
    }

    #[test]
    fn a_page_is_cut_at_its_first_document_outside_the_window() {
        let queries = click_queries(vec![
            page("q", &["x", "y", "gone", "z"], &[false, true, false, true]),
            page("q", &["gone", "x"], &[false, true]),
        ]);
        let window = Window {
            qid: "clicks:q".into(),
            features: crate::features::FeatureMatrix::empty(0),
            ids: vec!["z".into(), "y".into(), "x".into()],
            labels: vec![0, 0, 0],
        };
        let (sessions, cut) = row_sessions(&queries, &[window]);
        assert_eq!(
            sessions,
            [RowSession {
                qid: "clicks:q".into(),
                shown: vec![2, 1],
                clicks: vec![1],
            }]
        );
        // The click on `z` (after `gone`) and the one on the second page's `x`.
        assert_eq!(cut, 2);
    }
}
