//! `/search?sort=`: the documents matching the query ordered by one of SPEC §1.8's scores
//! instead of relevance (`crate::features::social` computes them).
//!
//! Every matching document is visited (tantivy's top-k collector over the first-phase
//! model's match set, with the sort key read from fast fields). Documents without the fields
//! a mode needs come after all those with them; ties, and those documents among themselves,
//! are ordered by the first-phase score, then by document id: the canonical order of
//! `crate::text::search::BoundModel::top`, which every shard of a collection and its root
//! follow too, so a sharded sort equals the single index's.

use std::fmt;

use tantivy::collector::TopDocs;
use tantivy::{DocId, Score, Searcher, SegmentReader};

use crate::features::social;
use crate::text::columns::{DocColumns, SegmentSocial, SignalsPresent, SocialSignals};
use crate::text::config::SocialParams;
use crate::text::search::{canonical_order_by, BoundModel, Candidate};

/// An order of the matching documents by a static or social score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SortMode {
    /// Reddit hot (production sign placement).
    Hot,
    /// Hacker News gravity.
    Gravity,
    /// The Wilson lower bound of the up-vote share.
    Best,
    /// Newest `published_at` first.
    Fresh,
    /// The Bayesian average rating.
    Rating,
}

impl SortMode {
    pub const ALL: [SortMode; 5] = [
        SortMode::Hot,
        SortMode::Gravity,
        SortMode::Best,
        SortMode::Fresh,
        SortMode::Rating,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SortMode::Hot => "hot",
            SortMode::Gravity => "gravity",
            SortMode::Best => "best",
            SortMode::Fresh => "fresh",
            SortMode::Rating => "rating",
        }
    }

    /// The fields a document needs to have this mode's key.
    pub fn needs(self) -> &'static str {
        match self {
            SortMode::Hot | SortMode::Fresh => "published_at",
            SortMode::Gravity => "published_at and votes_up or votes_down",
            SortMode::Best => "votes_up or votes_down",
            SortMode::Rating => "rating and rating_count",
        }
    }

    /// Whether an index where some document carries `present` fields can be sorted this way.
    pub fn possible(self, present: SignalsPresent) -> bool {
        match self {
            SortMode::Hot | SortMode::Fresh => present.published_at,
            SortMode::Gravity => present.published_at && present.votes,
            SortMode::Best => present.votes,
            SortMode::Rating => present.rating,
        }
    }

    /// The mode's key of a document: only its own score is computed (sorting visits every
    /// matching document).
    pub fn key(
        self,
        signals: &SocialSignals,
        params: &SocialParams,
        now: i64,
        global_rating: Option<f64>,
    ) -> Option<f64> {
        match self {
            SortMode::Hot => social::hot_of(signals),
            SortMode::Gravity => social::gravity_of(signals, params, now),
            SortMode::Best => social::wilson_of(signals, params),
            SortMode::Fresh => signals.published_at.map(|t| t as f64),
            SortMode::Rating => social::bayes_of(signals, params, global_rating),
        }
    }
}

impl fmt::Display for SortMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for SortMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        SortMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                format!("unknown sort `{s}` (known: relevance, hot, gravity, best, fresh, rating)")
            })
    }
}

/// A sort mode with what its keys are computed from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SortBy {
    pub mode: SortMode,
    pub params: SocialParams,
    /// Unix seconds.
    pub now: i64,
    /// The collection's mean rating (the Bayesian average's C).
    pub global_rating: Option<f64>,
}

/// A sorted hit's key: the mode's score (−∞ where the document lacks it), then relevance.
type SortKey = (f64, Score);

/// The matching documents `offset + 1 ..= offset + limit` in `mode`'s order, each with its
/// sort key (`None` where the document lacks the fields) and its first-phase score;
/// `columns` are `searcher`'s.
///
/// Equal keys are ordered by id: a tie group crossing the cut is fetched whole, as
/// `crate::text::search::BoundModel::top` does (the list is fetched one longer, then twice
/// as long, until its last key differs from the key at the cut).
pub(crate) fn top_sorted(
    searcher: &Searcher,
    columns: &DocColumns,
    bound: &BoundModel,
    by: SortBy,
    limit: usize,
    offset: usize,
) -> tantivy::Result<Vec<Candidate>> {
    let SortBy {
        mode,
        params,
        now,
        global_rating,
    } = by;
    let want = offset + limit;
    if want == 0 {
        return Ok(Vec::new());
    }
    let mut fetch = want + 1;
    let ranking = bound.ranking_query();
    let mut top = loop {
        let collector = TopDocs::with_limit(fetch).tweak_score(move |segment: &SegmentReader| {
            let social = SegmentSocial::open(segment);
            move |doc: DocId, score: Score| -> SortKey {
                let key = mode.key(&social.signals(doc), &params, now, global_rating);
                (key.unwrap_or(f64::NEG_INFINITY), score)
            }
        });
        let top = searcher.search(ranking.as_ref(), &collector)?;
        let same = |a: &SortKey, b: &SortKey| {
            a.0.to_bits() == b.0.to_bits() && a.1.to_bits() == b.1.to_bits()
        };
        if top.len() < fetch || !same(&top[fetch - 1].0, &top[want - 1].0) {
            break top;
        }
        fetch = fetch.saturating_mul(2);
    };
    canonical_order_by(
        columns,
        &mut top,
        |t| (t.0 .0.to_bits(), t.0 .1.to_bits()),
        |t| t.1,
    )?;
    top.truncate(want);
    top.drain(..offset.min(top.len()));
    Ok(top
        .into_iter()
        .map(|((key, score), address)| Candidate {
            address,
            score,
            sort_key: Some(key.is_finite().then_some(key)),
        })
        .collect())
}
