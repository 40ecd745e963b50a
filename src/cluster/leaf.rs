//! A leaf: one shard's index answering a root's calls ([`super::wire`]).
//!
//! Each call runs against a pinned searcher ([`Pins`]): the statistics call opens the current
//! one and names its generation, and the later calls of the same search ask for that
//! generation again. A leaf keeps its last few searchers open (a searcher holds its segments'
//! files open, so a commit or merge in between does not invalidate the documents the root
//! was given); a generation no longer kept is refused, never silently replaced. A searcher is
//! kept with the link scores of its index generation (`Engine::snapshot`), so a replica that
//! switches generations (`super::generation`) mid-search still answers from one generation.

use crate::sync::Recover;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tantivy::{DocAddress, Searcher};

use super::wire::*;
use crate::features::{Extraction, Prf, FEATURE_SET_VERSION};
use crate::links::LinkData;
use crate::search::{Engine, Ranking, Retriever, Returns, SearchError, SearchQuery, SortMode};
use crate::text::columns::{CollapseKeys, MeanRating};
use crate::text::query::AnalyzedQuery;
use crate::text::stats::{GlobalStats, Stats};
use crate::text::stats_table::StatsTable;
use crate::text::ModelKind;

/// Why a leaf refused a call.
#[derive(Debug, thiserror::Error)]
pub enum LeafError {
    #[error("this leaf speaks cluster protocol {PROTOCOL}, the call protocol {0}")]
    Protocol(u32),
    #[error("generation {0} is no longer open on this shard (it changed during the search)")]
    GenerationGone(u64),
    #[error("document {0:?} is not in the pinned searcher (or is deleted)")]
    NoSuchDoc(DocRef),
    /// A field of the call out of its bounds, as `/search` refuses its own parameters.
    #[error("{field}: {message}")]
    Field {
        field: &'static str,
        message: String,
    },
    /// The shard committed since the documents a graph job read: its scores would describe
    /// another index.
    #[error(
        "this shard is at index generation {now}, not {read} whose documents the scores were \
         computed from; run the graph job again"
    )]
    Changed { read: String, now: String },
    #[error(transparent)]
    Search(SearchError),
}

impl From<SearchError> for LeafError {
    /// Statistics the call shipped without what its query needs are the caller's error.
    fn from(e: SearchError) -> Self {
        if let SearchError::Internal(inner) = &e {
            if let Some(tantivy::TantivyError::InternalError(m)) = inner.downcast_ref() {
                if m.starts_with(crate::text::stats::LACKING) {
                    return LeafError::Field {
                        field: "stats",
                        message: m.clone(),
                    };
                }
            }
        }
        LeafError::Search(e)
    }
}

impl From<tantivy::TantivyError> for LeafError {
    fn from(e: tantivy::TantivyError) -> Self {
        LeafError::Search(e.into())
    }
}

/// The searchers a leaf keeps for searches in flight. A pinned generation is a searcher and
/// the link scores served with it: a graph job's scores (`store_links`, a single node's job)
/// replace the link scores under the same searcher, and make a new generation, so a search
/// never mixes two sets of scores and no search after the swap reads the old ones.
pub struct Pins {
    /// Distinguishes this process's generations from an earlier process's (tantivy counts
    /// searcher generations from 0 in every process): the top 24 bits of a generation.
    incarnation: u64,
    recent: Mutex<Recent>,
}

#[derive(Default)]
struct Recent {
    pins: VecDeque<Pinned>,
    /// Link-score swaps seen under one searcher: bits 32–39 of a generation.
    swaps: u64,
}

/// A kept searcher and the link scores of its generation.
#[derive(Clone)]
pub struct Pinned {
    pub generation: u64,
    pub searcher: Searcher,
    pub links: Option<Arc<LinkData>>,
    /// The searcher's whole statistics table as bytes, computed at the first `table` call.
    table: Arc<Mutex<Option<Arc<Vec<u8>>>>>,
}

impl Default for Pins {
    fn default() -> Self {
        Pins {
            incarnation: u64::from(rand::random::<u32>() & 0xff_ffff) << 40,
            recent: Mutex::default(),
        }
    }
}

impl Pins {
    /// How many searchers are kept: a search lasts milliseconds, commits seconds apart.
    const KEEP: usize = 4;

    fn generation(&self, searcher: &Searcher, swaps: u64) -> u64 {
        self.incarnation
            | ((swaps & 0xff) << 32)
            | (searcher.generation().generation_id() & 0xffff_ffff)
    }

    /// The current searcher with the current link scores, kept, with its generation.
    pub fn current(&self, engine: &Engine) -> Pinned {
        let (searcher, links) = engine.snapshot();
        let mut recent = self.recent.locked();
        let same_links = |p: &Pinned| match (&p.links, &links) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        let id = searcher.generation().generation_id();
        let mut swapped = false;
        for kept in recent.pins.iter().rev() {
            if kept.searcher.generation().generation_id() == id {
                if same_links(kept) {
                    return kept.clone();
                }
                swapped = true;
                break;
            }
        }
        if swapped {
            recent.swaps += 1;
        }
        let pinned = Pinned {
            generation: self.generation(&searcher, recent.swaps),
            searcher,
            links,
            table: Arc::default(),
        };
        recent.pins.push_back(pinned.clone());
        if recent.pins.len() > Self::KEEP {
            recent.pins.pop_front();
        }
        pinned
    }

    /// The searcher of `generation`, if still kept.
    pub fn get(&self, engine: &Engine, generation: u64) -> Result<Pinned, LeafError> {
        self.get_with_current(engine, generation).map(|(p, _)| p)
    }

    /// [`Pins::get`], with the current searcher's generation (looked up on the way).
    fn get_with_current(
        &self,
        engine: &Engine,
        generation: u64,
    ) -> Result<(Pinned, u64), LeafError> {
        let current = self.current(engine);
        let now = current.generation;
        if now == generation {
            return Ok((current, now));
        }
        let recent = self.recent.locked();
        recent
            .pins
            .iter()
            .find(|p| p.generation == generation)
            .cloned()
            .map(|p| (p, now))
            .ok_or(LeafError::GenerationGone(generation))
    }
}

fn check(protocol: u32) -> Result<(), LeafError> {
    if protocol == PROTOCOL {
        Ok(())
    } else {
        Err(LeafError::Protocol(protocol))
    }
}

fn lack_ratings() -> LeafError {
    LeafError::Field {
        field: "stats",
        message: "the collection statistics shipped with this call lack the ratings".into(),
    }
}

/// The document `d` names in `searcher`: in one of its segments, and not deleted there (a
/// deleted document stays in its segment until a merge, and must not be read meanwhile).
fn address(searcher: &Searcher, d: DocRef) -> Result<DocAddress, LeafError> {
    let readers = searcher.segment_readers();
    match readers.get(d.segment as usize) {
        Some(r) if d.doc < r.max_doc() && !r.is_deleted(d.doc) => {
            Ok(DocAddress::new(d.segment, d.doc))
        }
        _ => Err(LeafError::NoSuchDoc(d)),
    }
}

/// The most candidates or documents one call may name: the deepest result a search may
/// reach (`offset + k`, which bounds every window too).
pub const MAX_CALL_DOCS: usize = crate::search::request::MAX_DEPTH;

/// Refuses a count above [`MAX_CALL_DOCS`] (and a zero `limit`), naming the field and bound.
fn bounded(field: &'static str, n: usize, min: usize) -> Result<(), LeafError> {
    if (min..=MAX_CALL_DOCS).contains(&n) {
        Ok(())
    } else {
        Err(LeafError::Field {
            field,
            message: format!("must be between {min} and {MAX_CALL_DOCS}, got {n}"),
        })
    }
}

/// Shipped statistics a collection could have: no term in more documents than the
/// collection holds (tantivy's idf asserts it).
fn checked_stats(stats: &GlobalStats) -> Result<(), LeafError> {
    for (field, terms) in &stats.terms {
        for (term, t) in terms {
            if t.df > stats.num_docs {
                return Err(LeafError::Field {
                    field: "stats",
                    message: format!(
                        "df {} of {field}:{term} exceeds num_docs {}",
                        t.df, stats.num_docs
                    ),
                });
            }
        }
    }
    Ok(())
}

/// The query text's length bound, as `/search` applies it.
fn checked_text(text: &str) -> Result<(), LeafError> {
    use crate::text::query::MAX_QUERY_BYTES;
    if text.len() > MAX_QUERY_BYTES {
        return Err(LeafError::Field {
            field: "text",
            message: format!(
                "must be at most {MAX_QUERY_BYTES} bytes, got {}",
                text.len()
            ),
        });
    }
    Ok(())
}

/// The shard's documents as its link graph reads them (id, URL, out-links; sorted by id),
/// from `searcher`, the view of index generation `generation`: for a root's graph job.
pub fn link_docs(
    engine: &Engine,
    searcher: &Searcher,
    generation: String,
    call: &LinkDocsCall,
) -> Result<LinkDocsReply, LeafError> {
    check(call.protocol)?;
    let docs = crate::links::link_docs(&engine.index, searcher)
        .map_err(|e| LeafError::Search(SearchError::Internal(e)))?
        .into_iter()
        .map(|d| LinkDoc {
            id: d.id,
            url: d.url,
            links: d.links,
        })
        .collect();
    Ok(LinkDocsReply { generation, docs })
}

/// Stores the shard's part of the collection's link scores and serves them, if the shard is
/// still at the index generation they were computed from (the caller holds the index's write
/// lock, so it stays there), as a single node's graph job stores and serves its own. The
/// entries stored.
pub fn store_links(engine: &Engine, call: LinksCall) -> Result<usize, LeafError> {
    check(call.protocol)?;
    let internal = |e: anyhow::Error| LeafError::Search(SearchError::Internal(e));
    let now = crate::links::generation_key(&engine.index).map_err(internal)?;
    if now != call.generation {
        return Err(LeafError::Changed {
            read: call.generation,
            now,
        });
    }
    if call.scores.part.is_none() {
        return Err(LeafError::Field {
            field: "scores",
            message: "a shard's link scores are its part of the collection's".into(),
        });
    }
    // At this generation the part has an entry per live document (a part of another shard,
    // or of another state of this one, would not).
    let docs = engine.index.num_docs();
    if call.scores.n() as u64 != docs {
        return Err(LeafError::Field {
            field: "scores",
            message: format!(
                "the part holds {} entries; this shard has {docs} documents",
                call.scores.n()
            ),
        });
    }
    let refused = |e: anyhow::Error| LeafError::Field {
        field: "scores",
        message: format!("{e:#}"),
    };
    // Checked as a stored file is: the sidecar's writer refuses what its reader would
    // (lengths, finite values), before the serving form is built from them.
    crate::links::store(&engine.index, &now, &call.scores).map_err(refused)?;
    let data = LinkData::new(call.scores).map_err(internal)?;
    let nodes = data.scores.n();
    engine.set_links(Some(Arc::new(data)));
    Ok(nodes)
}

pub fn info(engine: &Engine) -> InfoResponse {
    InfoResponse {
        protocol: PROTOCOL,
        config: engine.index.config.clone(),
        feature_set: FEATURE_SET_VERSION.to_string(),
        num_docs: engine.index.num_docs(),
        store_generation: engine.store_generation(),
        writes: false,
        primary: false,
    }
}

pub fn stats(engine: &Engine, pins: &Pins, call: &StatsCall) -> Result<StatsReply, LeafError> {
    check(call.protocol)?;
    let fields = &engine.index.config.fields;
    if let Some(name) = call.request.terms.keys().find(|f| !fields.contains_key(*f)) {
        return Err(LeafError::Field {
            field: "request",
            message: format!("{name:?} is no text field of this index"),
        });
    }
    let Pinned {
        generation,
        searcher,
        ..
    } = match call.generation {
        Some(g) => pins.get(engine, g)?,
        None => pins.current(engine),
    };
    let schema = engine.index.index.schema();
    let mut stats = GlobalStats::gather(&searcher, &schema, &call.request)?;
    if call.request.rating {
        stats.rating = Some(engine.index.doc_columns(&searcher)?.rating_sum(&searcher));
    }
    Ok(StatsReply {
        protocol: PROTOCOL,
        generation,
        stats,
    })
}

/// The whole statistics table of the current searcher ([`StatsTable`], as bytes) and its
/// generation, computed once per generation.
pub fn table(
    engine: &Engine,
    pins: &Pins,
    call: &TableCall,
) -> Result<(u64, Arc<Vec<u8>>), LeafError> {
    check(call.protocol)?;
    let pinned = pins.current(engine);
    let mut table = pinned.table.locked();
    let bytes = match &*table {
        Some(t) => t.clone(),
        None => {
            let (schema, searcher) = (engine.index.index.schema(), &pinned.searcher);
            let rating = engine.index.doc_columns(searcher)?.rating_sum(searcher);
            let t = Arc::new(StatsTable::of_searcher(searcher, &schema, rating)?.to_bytes());
            *table = Some(t.clone());
            t
        }
    };
    Ok((pinned.generation, bytes))
}

pub fn query(engine: &Engine, pins: &Pins, call: &QueryCall) -> Result<QueryReply, LeafError> {
    check(call.protocol)?;
    bounded("limit", call.limit, 1)?;
    checked_text(&call.text)?;
    checked_stats(&call.stats)?;
    let (pinned, current) = pins.get_with_current(engine, call.generation)?;
    let searcher = &pinned.searcher;
    let retriever: Retriever = call.model.parse().map_err(|e: String| SearchError::Param {
        field: "model",
        message: e,
    })?;
    let schema = engine.index.index.schema();
    let source = call.stats.source(&schema);
    let mut q = SearchQuery::new(call.text.clone(), 1);
    q.model = retriever.text();
    q.dense = retriever == Retriever::Dense;
    q.field.clone_from(&call.field);
    q.now = call.now;
    q.lang.clone_from(&call.lang);
    let mut rating = MeanRating::OfIndex;
    if let Some(sort) = &call.sort {
        let mode: SortMode = sort.parse().map_err(|e: String| SearchError::Param {
            field: "sort",
            message: e,
        })?;
        q.ranking = Ranking::Sort(mode);
        rating = MeanRating::Collection(call.stats.rating.ok_or_else(lack_ratings)?);
    }
    let stats = Stats::new(&source);
    let query = AnalyzedQuery::new(call.text.as_str());
    let view = engine.view(&query, searcher, &stats, pinned.links.as_deref());
    let vectors = match retriever {
        Retriever::Dense => engine.dense().map(|d| d.index.vectors.model.clone()),
        Retriever::Text(_) => None,
    };
    let top = match retriever {
        Retriever::Text(kind) => Engine::shard_top(view, &q, kind, call.limit, rating)?,
        Retriever::Dense if call.dense_optional && vectors.is_none() => None,
        Retriever::Dense => {
            // The rule book refuses a sort of the dense first phase, as on a single index.
            q.validate()?;
            engine.shard_dense_top(&q, searcher, call.limit)?
        }
    };
    let no_terms = top.is_none();
    let (total_hits, hits, sortable) = match top {
        Some(top) => (top.total_hits, top.hits, top.sortable),
        None => (0, Vec::new(), false),
    };
    let addresses: Vec<DocAddress> = hits.iter().map(|h| h.candidate.address).collect();
    // Each hit's entry in this shard's link scores.
    let entries: Vec<Option<u32>> = match pinned.links.as_deref() {
        Some(links) => links.nodes_of(searcher, &addresses)?,
        None => vec![None; hits.len()],
    };
    let boosts: Vec<Option<u32>> = match call.boost {
        Some(weight) => {
            let links = pinned.links.as_deref().ok_or(SearchError::Param {
                field: "boost",
                message: "no link scores on this shard; run `rankd graph` on the collection".into(),
            })?;
            entries
                .iter()
                .map(|&node| Some(links.pagerank_boost_of(node, weight).to_bits()))
                .collect()
        }
        None => vec![None; hits.len()],
    };
    let nodes = entries.iter().map(|e| {
        let links = pinned.links.as_deref()?;
        e.map(|u| links.scores.global(u))
    });
    let keys: Vec<Option<CollapseKeys>> = match call.collapse.is_empty() {
        false => {
            let columns = engine.index.doc_columns(searcher)?;
            hits.iter()
                .map(|h| {
                    let keys = columns.collapse_keys(h.candidate.address);
                    Some(crate::search::collapse::keys_read(keys, &call.collapse))
                })
                .collect()
        }
        true => vec![None; hits.len()],
    };
    let mut shown: Vec<Option<WireHit>> = vec![None; hits.len()];
    if let Some(returns) = call.fetch {
        let rows: Vec<usize> = match call.fetch_first {
            None => (0..hits.len()).collect(),
            Some(n) if call.collapse.is_empty() => (0..hits.len().min(n)).collect(),
            Some(n) => {
                let keys: Vec<CollapseKeys> = keys.iter().map(|k| k.unwrap_or_default()).collect();
                crate::search::collapse::collapse(&keys, &call.collapse, &[])
                    .into_iter()
                    .map(|(row, _)| row)
                    .take(n)
                    .collect()
            }
        };
        let at: Vec<DocAddress> = rows.iter().map(|&r| addresses[r]).collect();
        let fields = engine.hit_fields(searcher, &stats, &query, returns, &at)?;
        for (row, h) in rows.into_iter().zip(fields) {
            shown[row] = Some(wire_hit(h, None));
        }
    }
    let mut shown = shown.into_iter();
    Ok(QueryReply {
        protocol: PROTOCOL,
        current,
        total_hits,
        no_terms,
        sortable,
        vectors,
        hits: hits
            .into_iter()
            .zip(boosts)
            .zip(nodes)
            .zip(keys)
            .map(|(((h, boost), node), keys)| WireCandidate {
                doc: DocRef {
                    segment: h.candidate.address.segment_ord,
                    doc: h.candidate.address.doc_id,
                },
                id: h.id,
                score: h.candidate.score.to_bits(),
                sort_key: h
                    .candidate
                    .sort_key
                    .map(|k| k.unwrap_or(f64::NEG_INFINITY).to_bits()),
                boost,
                node,
                keys,
                shown: shown.next().flatten(),
            })
            .collect(),
    })
}

pub fn features(
    engine: &Engine,
    pins: &Pins,
    call: &FeaturesCall,
) -> Result<FeaturesReply, LeafError> {
    check(call.protocol)?;
    bounded("docs", call.docs.len(), 0)?;
    bounded("window_nodes", call.window_nodes.len(), 0)?;
    if !call.window_nodes.windows(2).all(|w| w[0] < w[1]) {
        return Err(LeafError::Field {
            field: "window_nodes",
            message: "must be strictly ascending".into(),
        });
    }
    checked_text(&call.text)?;
    checked_stats(&call.stats)?;
    let pinned = pins.get(engine, call.generation)?;
    let searcher = &pinned.searcher;
    let docs = call
        .docs
        .iter()
        .map(|&(d, score, rank)| Ok((address(searcher, d)?, f32::from_bits(score), rank)))
        .collect::<Result<Vec<_>, LeafError>>()?;
    let schema = engine.index.index.schema();
    let source = call.stats.source(&schema);
    let how = Extraction {
        prf: if call.prf { Prf::Compute } else { Prf::Skip },
        scores_are_bm25f: call.scores_are_bm25f,
        now: call.now,
        rating: MeanRating::Collection(call.stats.rating.ok_or_else(lack_ratings)?),
    };
    let stats = Stats::new(&source);
    let query = AnalyzedQuery::new(call.text.as_str());
    let vector = if call.dense {
        engine.query_vector(&call.text, searcher, call.embedder.as_deref())?
    } else {
        None
    };
    let view = crate::features::View {
        dense: vector.as_ref().map(|v| v.similarity()),
        ..engine.view(&query, searcher, &stats, pinned.links.as_deref())
    };
    let (m, out_links) =
        Engine::shard_features(view, &docs, &call.window_nodes, call.rm3.as_ref(), how)?;
    Ok(FeaturesReply {
        protocol: PROTOCOL,
        feature_set: FEATURE_SET_VERSION.to_string(),
        cols: m.cols,
        values: m.values.iter().map(|v| v.to_bits()).collect(),
        out_links,
    })
}

pub fn feedback(
    engine: &Engine,
    pins: &Pins,
    call: &FeedbackCall,
) -> Result<FeedbackReply, LeafError> {
    check(call.protocol)?;
    bounded("docs", call.docs.len(), 0)?;
    let pinned = pins.get(engine, call.generation)?;
    let searcher = &pinned.searcher;
    let candidates = call
        .docs
        .iter()
        .map(|&d| Ok(crate::features::Candidate::new(address(searcher, d)?, 0.0)))
        .collect::<Result<Vec<_>, LeafError>>()?;
    Ok(FeedbackReply {
        protocol: PROTOCOL,
        docs: crate::features::prf::feedback_docs(&engine.index, searcher, &candidates)
            .map_err(SearchError::from)?,
    })
}

pub fn hits(engine: &Engine, pins: &Pins, call: &HitsCall) -> Result<HitsReply, LeafError> {
    check(call.protocol)?;
    bounded("docs", call.docs.len(), 0)?;
    checked_text(&call.text)?;
    checked_stats(&call.stats)?;
    let pinned = pins.get(engine, call.generation)?;
    let searcher = &pinned.searcher;
    let addresses = call
        .docs
        .iter()
        .map(|&d| address(searcher, d))
        .collect::<Result<Vec<_>, _>>()?;
    let schema = engine.index.index.schema();
    let source = call.stats.source(&schema);
    let returns = Returns {
        url: call.url,
        title: call.title,
        snippet: call.snippet,
    };
    let stats = Stats::new(&source);
    let query = AnalyzedQuery::new(call.text.as_str());
    let shown = engine.hit_fields(searcher, &stats, &query, returns, &addresses)?;
    let mut explained = match &call.explain {
        Some(e) => explain(engine, &pinned, &stats, &query, e, &addresses)?
            .into_iter()
            .map(Some)
            .collect(),
        None => vec![None; addresses.len()],
    }
    .into_iter();
    Ok(HitsReply {
        protocol: PROTOCOL,
        hits: shown
            .into_iter()
            .map(|h| wire_hit(h, explained.next().flatten()))
            .collect(),
    })
}

fn wire_hit(h: crate::search::HitFields, explain: Option<WireExplain>) -> WireHit {
    WireHit {
        id: h.id,
        url: h.url.flatten(),
        title: h.title,
        snippet: h.snippet,
        explain,
    }
}

/// This shard's part of the explanations of the documents at `addresses`: each one's
/// first-phase score breakdown with the collection's statistics, and its link scores.
fn explain(
    engine: &Engine,
    pinned: &Pinned,
    stats: &Stats,
    query: &AnalyzedQuery,
    call: &ExplainCall,
    addresses: &[DocAddress],
) -> Result<Vec<WireExplain>, LeafError> {
    let kind: Option<ModelKind> =
        call.model
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(|e: String| SearchError::Param {
                field: "model",
                message: e,
            })?;
    let searcher = &pinned.searcher;
    let bound = match kind {
        Some(kind) => engine
            .index
            .bind(stats, kind, call.field.as_deref(), query)
            .map_err(SearchError::from)?,
        None => None,
    };
    let first_phase = match bound {
        Some(bound) => crate::search::explain_first_phase(searcher, stats, &bound, addresses)?
            .iter()
            .map(|e| {
                ExplanationTree::of(e).map(Some).map_err(|e| {
                    SearchError::Internal(anyhow::anyhow!("cannot encode an explanation: {e}"))
                })
            })
            .collect::<Result<Vec<_>, _>>()?,
        None => vec![None; addresses.len()],
    };
    let links = match pinned.links.as_deref() {
        Some(l) => l
            .nodes_of(searcher, addresses)?
            .into_iter()
            .map(|n| l.scores_of(n))
            .collect(),
        None => vec![None; addresses.len()],
    };
    Ok(first_phase
        .into_iter()
        .zip(links)
        .map(|(first_phase, links)| WireExplain { first_phase, links })
        .collect())
}
