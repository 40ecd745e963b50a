//! The messages between a cluster's root and its leaves (`POST /cluster/v1/*`, JSON).
//!
//! Scores and feature values travel as `f32` bit patterns (`u32`): the root must compare and
//! rerank exactly the floats the leaves computed, and bit patterns leave no question about
//! decimal round trips. Every message carries the protocol version; a leaf refuses another.
//!
//! A search pins each shard's searcher by its generation: the first call to a leaf (the
//! statistics) returns the generation it answered from, and every later call of the same
//! search names it, so one search never mixes two states of a shard, and a [`DocRef`] taken
//! in one call is valid in the next.

use serde::{Deserialize, Serialize};

use crate::features::prf::{FeedbackDoc, Rm3Query};
use crate::links::NodeScores;
use crate::search::collapse::CollapseKey;
use crate::search::Returns;
use crate::text::columns::CollapseKeys;
use crate::text::stats::{GlobalStats, StatsRequest};
use crate::text::stats_table::StatsTable;
use crate::text::IndexConfig;

/// The version of these messages (2: link scores split by shard, so candidates carry their
/// graph node and feature replies their documents' out-links within the window; 3: the
/// first phase may ask for the candidates' collapse keys, and the hits for their
/// explanations; 5: the first phase filters by language, and collapse keys carry it; 6: the
/// first phase names the keys it collapses by, and candidates carry only those).
pub const PROTOCOL: u32 = 6;

/// The error code of a leaf's 400 that is the search's own fault (a parameter the shard
/// cannot take), not the call's: the root answers it as a 400 of its own, where any other
/// failed call counts against the replica.
pub const BAD_SEARCH: &str = "bad_search";

/// A document of a pinned searcher: segment ordinal and document id within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DocRef {
    pub segment: u32,
    pub doc: u32,
}

/// `GET /cluster/v1/info`: what the root checks before it sends a leaf any search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InfoResponse {
    pub protocol: u32,
    /// The index configuration: every shard of a collection must have the same.
    pub config: IndexConfig,
    /// `crate::features::FEATURE_SET_VERSION`: rows are only comparable within one version.
    pub feature_set: String,
    pub num_docs: u64,
    /// The generation from a store the leaf serves, when it follows one
    /// (`crate::cluster::generation`).
    #[serde(default)]
    pub store_generation: Option<u64>,
    /// It takes the root's writes (`POST /cluster/v1/documents`): its admin API is on and it
    /// is no replica following a store.
    #[serde(default)]
    pub writes: bool,
    /// It is its shard's primary (`crate::cluster::primary`): its writes reach the store's
    /// followers, which take none themselves.
    #[serde(default)]
    pub primary: bool,
}

/// `POST /cluster/v1/stats`: this shard's part of the collection statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatsCall {
    pub protocol: u32,
    pub request: StatsRequest,
    /// The searcher to read them from: a search's pinned generation (a second statistics
    /// round, RM3's expansion terms), or `None` for the current one, which the call pins.
    #[serde(default)]
    pub generation: Option<u64>,
}

/// `POST /cluster/v1/table`: the shard's whole statistics table
/// ([`StatsTable`]) of its current searcher, which it pins; the reply is bytes
/// ([`table_reply`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableCall {
    pub protocol: u32,
}

/// The body of `/cluster/v1/table`'s answer (`application/octet-stream`): the protocol and
/// the generation the table is of (`u32` and `u64`, little-endian), then the table's own
/// checked bytes ([`StatsTable::to_bytes`]). Binary, not JSON: a table holds every term of
/// the shard.
pub(crate) fn table_reply(generation: u64, table: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + table.len());
    out.extend_from_slice(&PROTOCOL.to_le_bytes());
    out.extend_from_slice(&generation.to_le_bytes());
    out.extend_from_slice(table);
    out
}

/// Reads [`table_reply`]'s bytes: the generation and the table.
pub(crate) fn read_table_reply(bytes: &[u8]) -> Result<(u64, StatsTable), String> {
    if bytes.len() < 12 {
        return Err(format!("a table reply of {} bytes", bytes.len()));
    }
    let protocol = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes"));
    if protocol != PROTOCOL {
        return Err(format!(
            "the leaf speaks cluster protocol {protocol}, this root {PROTOCOL}"
        ));
    }
    let generation = u64::from_le_bytes(bytes[4..12].try_into().expect("8 bytes"));
    let table = StatsTable::from_bytes(&bytes[12..]).map_err(|e| e.to_string())?;
    Ok((generation, table))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatsReply {
    pub protocol: u32,
    /// The searcher the statistics come from; later calls of the search name it.
    pub generation: u64,
    pub stats: GlobalStats,
}

/// `POST /cluster/v1/query`: this shard's first-phase top with the collection's statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueryCall {
    pub protocol: u32,
    pub generation: u64,
    pub text: String,
    /// A `crate::text::ModelKind` name.
    pub model: String,
    pub field: Option<String>,
    pub limit: usize,
    pub stats: GlobalStats,
    /// The PageRank boost's λ: each candidate then carries what the boost adds to it.
    #[serde(default)]
    pub boost: Option<f32>,
    /// Each candidate carries its keys of these kinds (the root collapses the merged window
    /// by them; `crate::search::collapse::keys_read`); empty: no keys.
    #[serde(default)]
    pub collapse: Vec<CollapseKey>,
    /// Each candidate carries these fields of what the page shows of it (a short
    /// first-phase page: the root then needs no hits round).
    #[serde(default)]
    pub fetch: Option<Returns>,
    /// With `fetch`: only the first this many candidates carry the fields, counting those
    /// the shard's own collapse by `collapse` keeps (`None`: every candidate). A collapsed
    /// page is a collapse of the merged window, so its hits are almost always among each
    /// shard's first kept ones; the root asks the shards for any that are not.
    #[serde(default)]
    pub fetch_first: Option<usize>,
    /// `sort=`: the shard's top in this sort's order (a `crate::search::SortMode` name),
    /// keyed at `now` with the ratings of `stats`.
    #[serde(default)]
    pub sort: Option<String>,
    /// The search's clock (Unix seconds).
    #[serde(default)]
    pub now: Option<i64>,
    /// `lang=`: only documents in this language are ranked and counted.
    #[serde(default)]
    pub lang: Option<String>,
    /// With the dense retriever: a shard without document vectors answers no hits (and no
    /// [`QueryReply::vectors`]) instead of refusing. The root's default first phase asks
    /// so: hybrid when every shard has vectors the reranker can read, else BM25F.
    #[serde(default)]
    pub dense_optional: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueryReply {
    pub protocol: u32,
    /// The generation the leaf's current searcher has as it answers: a root that keeps the
    /// shard's statistics table of an older one fetches the table again.
    #[serde(default)]
    pub current: u64,
    /// This shard's documents matching at least one query term.
    pub total_hits: usize,
    /// The query has no searchable term for the call's model (the single index then answers
    /// nothing; a fusion counts the hits of its first input that has terms).
    #[serde(default)]
    pub no_terms: bool,
    /// The shard's top in the canonical order.
    pub hits: Vec<WireCandidate>,
    /// With a sort: some document of the shard has the fields the sort needs.
    #[serde(default)]
    pub sortable: bool,
    /// With the dense retriever: the fingerprint of the embedder that computed the shard's
    /// document vectors (`crate::dense::fingerprint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vectors: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireCandidate {
    pub doc: DocRef,
    pub id: String,
    /// `f32::to_bits` of the first-phase score.
    pub score: u32,
    /// With a sort: `f64::to_bits` of its key, −∞ when the document lacks the sort's fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort_key: Option<u64>,
    /// With a boost: `f32::to_bits` of `λ·ln(ε + PageRank·N)` (SPEC §1.8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boost: Option<u32>,
    /// The document's node in the collection's link graph (`crate::graph::ShardPart`), when
    /// the shard has link scores and the document is in the graph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<u32>,
    /// Its collapse keys, when the call asked for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<CollapseKeys>,
    /// What the page shows of it, when the call asked to fetch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shown: Option<WireHit>,
}

/// `POST /cluster/v1/features`: the rows of this shard's documents of a merged window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeaturesCall {
    pub protocol: u32,
    pub generation: u64,
    pub text: String,
    pub stats: GlobalStats,
    /// The search's clock (Unix seconds) for the freshness features.
    pub now: i64,
    /// The first phase was BM25F: its scores are the `bm25f` feature.
    pub scores_are_bm25f: bool,
    /// Each document with its first-phase score bits and its 1-based rank in the window.
    pub docs: Vec<(DocRef, u32, usize)>,
    /// The link-graph nodes of the whole window, ascending: the leaf sends back its
    /// documents' out-links that end there ([`FeaturesReply::out_links`]).
    pub window_nodes: Vec<u32>,
    /// Whether to compute the RM3 features, from `rm3`: the relevance model the root
    /// estimated on the window's feedback documents (`None`: none could be).
    #[serde(default)]
    pub prf: bool,
    #[serde(default)]
    pub rm3: Option<Rm3Query>,
    /// Whether to compute the dense similarity (the reranker reads it): the leaf embeds the
    /// query when its index has vectors.
    #[serde(default)]
    pub dense: bool,
    /// The fingerprint of the embedder the reranker's dense similarity was trained on
    /// (`ActiveModel::embedder`): a leaf whose vectors another embedder computed leaves the
    /// feature at 0, as a single index does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedder: Option<String>,
}

/// `POST /cluster/v1/feedback`: the term counts of this shard's feedback documents (RM3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeedbackCall {
    pub protocol: u32,
    pub generation: u64,
    pub docs: Vec<DocRef>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeedbackReply {
    pub protocol: u32,
    /// One per requested document, in request order.
    pub docs: Vec<FeedbackDoc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeaturesReply {
    pub protocol: u32,
    pub feature_set: String,
    pub cols: usize,
    /// Row-major `f32::to_bits` values, one row per requested document, in request order;
    /// the window features keep their defaults (the root computes them from `out_links`).
    pub values: Vec<u32>,
    /// Each requested document's out-links that end in the window (link-graph nodes), in
    /// request order: the document's edges in the window's link subgraph.
    pub out_links: Vec<Vec<u32>>,
}

/// `POST /cluster/v1/hits`: what the page shows of this shard's documents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HitsCall {
    pub protocol: u32,
    pub generation: u64,
    pub text: String,
    pub stats: GlobalStats,
    pub url: bool,
    pub title: bool,
    pub snippet: bool,
    pub docs: Vec<DocRef>,
    /// With `explain=true`: the first phase each document's score breakdown is of.
    #[serde(default)]
    pub explain: Option<ExplainCall>,
}

/// The first phase a sharded page explains: its model (a `crate::text::ModelKind` name) and
/// field, scored with the call's statistics; and the documents' link scores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExplainCall {
    /// `None` for a fusion: its hits are explained by their places in the input lists.
    pub model: Option<String>,
    pub field: Option<String>,
}

/// A shard's part of a hit's explanation: what only the shard holding the document knows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireExplain {
    /// The first-phase score, term by term (`None` when the query has no searchable term).
    pub first_phase: Option<ExplanationTree>,
    /// The document's stored link scores.
    pub links: Option<NodeScores>,
}

/// tantivy's explanation tree as it serialises (tantivy reads none back).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExplanationTree {
    pub value: f32,
    pub description: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<ExplanationTree>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<String>,
}

impl ExplanationTree {
    pub fn of(e: &tantivy::query::Explanation) -> Result<Self, serde_json::Error> {
        serde_json::from_value(serde_json::to_value(e)?)
    }

    /// The tree as tantivy's type again, as a single index's explanation holds it.
    pub fn into_tantivy(self) -> tantivy::query::Explanation {
        let mut e = tantivy::query::Explanation::new_with_string(self.description, self.value);
        for d in self.details {
            e.add_detail(d.into_tantivy());
        }
        for c in self.context {
            e.add_context(c);
        }
        e
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HitsReply {
    pub protocol: u32,
    pub hits: Vec<WireHit>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireHit {
    pub id: String,
    pub url: Option<String>,
    pub title: Option<String>,
    pub snippet: Option<String>,
    /// When the call asked for explanations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explain: Option<WireExplain>,
}

/// `POST /cluster/v1/link_docs`: every live document's id, URL and out-links, for a root's
/// graph job over the collection (`crate::cluster::root::graph`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkDocsCall {
    pub protocol: u32,
}

/// The shard's documents as the graph reads them, sorted by id, and the index generation
/// they were read from ([`crate::links::generation_key`]): the scores computed from them are
/// stored only while the shard is still at that generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkDocsReply {
    pub generation: String,
    pub docs: Vec<LinkDoc>,
}

/// One document's part in the link graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkDoc {
    pub id: String,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub links: Vec<String>,
}

/// `POST /cluster/v1/links`: the shard's part of the collection's link scores
/// ([`crate::graph::LinkScores::part`]), computed from the documents of index generation
/// `generation`; stored and served by the leaf only if it is still at that generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinksCall {
    pub protocol: u32,
    pub generation: String,
    pub scores: crate::graph::LinkScores,
}

/// What storing a shard's link scores did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinksReply {
    /// Entries of the part stored.
    pub nodes: usize,
    /// On a primary, the store generation published with them.
    #[serde(default)]
    pub generation: Option<u64>,
}
