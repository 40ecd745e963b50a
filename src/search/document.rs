//! One document by id (`GET /doc/{id}`) and the documents similar to it by their links
//! (`GET /similar`, SPEC §2.4): library work the HTTP handlers call, so the server, a leaf and
//! any other front end answer them alike.

use serde_json::Value;
use tantivy::collector::TopDocs;
use tantivy::query::TermQuery;
use tantivy::schema::IndexRecordOption;
use tantivy::{TantivyDocument, Term};

use super::Engine;
use crate::links::NodeScores;

/// A document as `GET /doc/{id}` answers it: its stored fields and link scores.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct DocResponse {
    pub id: String,
    pub url: Option<String>,
    pub title: String,
    pub headings: String,
    pub body: String,
    pub anchor: String,
    pub links: Vec<String>,
    /// Seconds since the Unix epoch.
    pub published_at: Option<i64>,
    /// Its language (`en`, `ja`: a primary language subtag), `null` when unknown.
    pub lang: Option<String>,
    /// The other fields of its JSONL record, as given.
    #[schema(value_type = Object)]
    pub extra: serde_json::Map<String, Value>,
    /// Its link scores (`null` without `rankd graph`, or outside the link graph).
    pub link_scores: Option<NodeScores>,
}

/// One document similar to the asked one.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct SimilarHit {
    pub rank: usize,
    pub id: String,
    /// Linearised SimRank, within `error_bound` of SimRank with probability ≥ 0.999.
    pub score: f64,
    pub error_bound: f64,
}

/// `GET /similar`'s answer.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct SimilarResponse {
    pub doc: String,
    pub took_ms: f64,
    pub hits: Vec<SimilarHit>,
}

/// Why similar documents cannot be listed.
#[derive(Debug, thiserror::Error)]
pub enum SimilarError {
    #[error("k must be between 1 and 100, got {0}")]
    K(usize),
    #[error("no link scores for this index; run `rankd graph` first")]
    NoLinkScores,
    #[error(
        "this index is a shard of a collection and holds its part of the link graph only; \
         /similar needs the whole graph"
    )]
    ShardedLinkGraph,
    #[error("no document with id {0:?} in the link graph")]
    NotInGraph(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// The most similar documents `GET /similar` lists.
pub(crate) const MAX_SIMILAR: usize = 100;

impl Engine {
    /// The document with id `id`, `None` when there is none.
    pub fn document(&self, id: &str) -> tantivy::Result<Option<DocResponse>> {
        let index = &self.index;
        let searcher = index.reader.searcher();
        let query = TermQuery::new(
            Term::from_field_text(index.fields.id, id),
            IndexRecordOption::Basic,
        );
        let top = searcher.search(&query, &TopDocs::with_limit(1).order_by_score())?;
        let Some((_, address)) = top.first() else {
            return Ok(None);
        };
        let stored: TantivyDocument = searcher.doc(*address)?;
        let d = index.stored(&stored);
        let link_scores = self.links().and_then(|l| l.scores_of(l.node(&d.id)));
        Ok(Some(DocResponse {
            id: d.id,
            url: d.url,
            title: d.title,
            headings: d.headings,
            body: d.body,
            anchor: d.anchor,
            links: d.links,
            published_at: d.published_at,
            lang: d.lang,
            extra: d.extra,
            link_scores,
        }))
    }

    /// The `k` documents most similar to `id` by single-source linearised SimRank, with the
    /// diagonal `rankd graph` stored (error bound in `crate::graph::simrank`).
    pub fn similar(&self, id: &str, k: usize) -> Result<SimilarResponse, SimilarError> {
        if k == 0 || k > MAX_SIMILAR {
            return Err(SimilarError::K(k));
        }
        let links = self.links().ok_or(SimilarError::NoLinkScores)?;
        let whole = links.whole().ok_or(SimilarError::ShardedLinkGraph)?;
        let node = links
            .node(id)
            .ok_or_else(|| SimilarError::NotInGraph(id.to_string()))?;
        let start = std::time::Instant::now();
        let query = crate::graph::simrank::QueryParams::default();
        let similar = whole
            .simrank
            .top_k(&whole.graph, node, k, &query)
            .map_err(|e| SimilarError::Internal(e.into()))?;
        let hits = similar
            .into_iter()
            .enumerate()
            .map(|(i, (n, score))| SimilarHit {
                rank: i + 1,
                id: links.scores.keys[n as usize].clone(),
                score,
                error_bound: whole.simrank.error_bound(&query, score),
            })
            .collect();
        Ok(SimilarResponse {
            doc: id.to_string(),
            took_ms: start.elapsed().as_secs_f64() * 1e3,
            hits,
        })
    }
}
