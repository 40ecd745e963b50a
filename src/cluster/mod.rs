//! Sharded serving (issue 13; design in docs/design/scale-out.md): a collection split over
//! shards by a stable hash of the document id ([`routing`]), searched as one index.
//!
//! Exactness comes from two rules every part follows:
//!
//! - **Collection statistics are the collection's.** A search first gathers, from every
//!   shard, the statistics its models and features read (`crate::text::stats`), sums them,
//!   and scores every shard with the sums — Elasticsearch's `dfs_query_then_fetch`, Solr's
//!   `ExactStatsCache`. The sums are integers, so a shard computes exactly the floats the
//!   single index computes for the same document.
//! - **One order.** Shards return their top in the canonical order (score descending, then
//!   id ascending, `crate::text::search::BoundModel::top`), and the root merges by the same
//!   key, so the merged window is the single index's window, ties included.
//!
//! [`LocalCluster`] holds its shards in this process; it is the reference the networked root
//! is tested against, and what `rankd` uses to search a sharded data directory directly.

pub mod generation;
pub mod leaf;
pub mod membership;
pub mod metastore;
pub mod placement;
pub mod root;
pub mod routing;
pub mod storage;
pub mod wire;

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use tantivy::Searcher;

use crate::corpus::Document;
use crate::error::Invalid;

use crate::features::{self, FeatureMatrix};
use crate::search::{Engine, SearchQuery, ShardHit};
use crate::text::search::SearchError;
use crate::text::stats::{GlobalStats, Stats, StatsRequest};
use crate::text::ModelKind;

/// What `DIR/shards/collection.json` records of a collection split over shards on one disk
/// (`rankd ingest --shards N`): shard `s`'s data directory is `DIR/shards/<s>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Collection {
    pub shards: u32,
    /// [`routing::HASH_SCHEME`] when the documents were routed.
    pub hash_scheme: String,
}

/// `DIR/shards/collection.json`, if `dir` holds a collection split over shards.
pub fn read_collection(dir: &Path) -> anyhow::Result<Option<Collection>> {
    let path = dir.join("shards").join("collection.json");
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let c = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a collection record", path.display()))?;
    Ok(Some(c))
}

fn dirs_of(dir: &Path, shards: u32) -> Vec<PathBuf> {
    (0..shards)
        .map(|s| dir.join("shards").join(s.to_string()))
        .collect()
}

/// The data directories of `shards` shards under `dir`, created and recorded on first use;
/// a directory already split another way is refused (its documents would be misrouted).
pub fn shard_dirs(dir: &Path, shards: u32) -> anyhow::Result<Vec<PathBuf>> {
    if shards == 0 {
        return Err(Invalid("--shards must be at least 1".into()).into());
    }
    let base = dir.join("shards");
    let want = Collection {
        shards,
        hash_scheme: routing::HASH_SCHEME.to_string(),
    };
    match read_collection(dir)? {
        Some(have) if have != want => {
            return Err(Invalid(format!(
                "{} holds {} shards routed by {}; this ingest asks for {} shards routed by {}",
                base.display(),
                have.shards,
                have.hash_scheme,
                want.shards,
                want.hash_scheme
            ))
            .into())
        }
        Some(_) => {}
        None => {
            std::fs::create_dir_all(&base)
                .with_context(|| format!("cannot create {}", base.display()))?;
            crate::durable::write_atomic(
                &base.join("collection.json"),
                serde_json::to_string_pretty(&want)?.as_bytes(),
            )?;
        }
    }
    Ok(dirs_of(dir, shards))
}

/// The shards' data directories when `dir` holds a collection split over shards
/// (`DIR/shards/collection.json`), `None` when it does not. A collection routed by a scheme
/// this binary does not know is refused.
pub fn existing_shard_dirs(dir: &Path) -> anyhow::Result<Option<Vec<PathBuf>>> {
    let Some(c) = read_collection(dir)? else {
        return Ok(None);
    };
    if c.hash_scheme != routing::HASH_SCHEME {
        return Err(Invalid(format!(
            "{} is routed by {}; this rankd routes by {}",
            dir.join("shards").display(),
            c.hash_scheme,
            routing::HASH_SCHEME
        ))
        .into());
    }
    Ok(Some(dirs_of(dir, c.shards)))
}

/// `docs` split by [`routing::shard_of`], one list per shard.
pub fn route(docs: Vec<Document>, shards: u32) -> Vec<Vec<Document>> {
    let mut out: Vec<Vec<Document>> = (0..shards).map(|_| Vec::new()).collect();
    for d in docs {
        out[routing::shard_of(&d.id, shards) as usize].push(d);
    }
    out
}

/// A document of a merged first phase, and the shard it lives on.
#[derive(Debug, Clone, PartialEq)]
pub struct MergedHit {
    pub shard: usize,
    pub hit: ShardHit,
}

/// A sharded collection's first phase.
#[derive(Debug, Clone, PartialEq)]
pub struct MergedTop {
    /// Documents matching at least one query term, over every shard.
    pub total_hits: usize,
    pub hits: Vec<MergedHit>,
}

/// Merges the shards' lists (each in the canonical order) into the collection's top `limit`.
/// The collection's top `limit` is always within the union of the shards' top `limit`.
pub fn merge(lists: Vec<Vec<ShardHit>>, limit: usize) -> Vec<MergedHit> {
    let mut all: Vec<MergedHit> = lists
        .into_iter()
        .enumerate()
        .flat_map(|(shard, hits)| hits.into_iter().map(move |hit| MergedHit { shard, hit }))
        .collect();
    all.sort_by(|a, b| {
        b.hit
            .score
            .total_cmp(&a.hit.score)
            .then_with(|| a.hit.id.cmp(&b.hit.id))
    });
    all.truncate(limit);
    all
}

/// The shards of one collection, open in this process.
pub struct LocalCluster {
    pub shards: Vec<Engine>,
}

impl LocalCluster {
    pub fn new(shards: Vec<Engine>) -> Self {
        assert!(!shards.is_empty(), "a collection has at least one shard");
        LocalCluster { shards }
    }

    /// One searcher per shard, for every phase of one search.
    pub fn searchers(&self) -> Vec<Searcher> {
        self.shards
            .iter()
            .map(|e| e.index.reader.searcher())
            .collect()
    }

    /// The collection statistics `text` needs, summed over the shards.
    pub fn gather(&self, searchers: &[Searcher], text: &str) -> Result<GlobalStats, SearchError> {
        let config = &self.shards[0].index.config;
        let request = StatsRequest::for_query(config, text)?;
        let mut sum = GlobalStats::default();
        for (engine, searcher) in self.shards.iter().zip(searchers) {
            let schema = engine.index.index.schema();
            sum.add(&GlobalStats::gather(searcher, &schema, &request)?);
        }
        Ok(sum)
    }

    /// The collection's top `limit` of `q` with model `kind`: each shard's top `limit` with
    /// the collection's statistics, merged. `None` when the query has no searchable term.
    pub fn first_phase(
        &self,
        searchers: &[Searcher],
        stats: &GlobalStats,
        q: &SearchQuery,
        kind: ModelKind,
        limit: usize,
    ) -> Result<Option<MergedTop>, SearchError> {
        let mut lists = Vec::with_capacity(self.shards.len());
        let mut total_hits = 0;
        for (engine, searcher) in self.shards.iter().zip(searchers) {
            let schema = engine.index.index.schema();
            let source = stats.source(&schema);
            let Some(top) = engine.shard_top(searcher, &Stats::new(&source), q, kind, limit)?
            else {
                return Ok(None);
            };
            total_hits += top.total_hits;
            lists.push(top.hits);
        }
        Ok(Some(MergedTop {
            total_hits,
            hits: merge(lists, limit),
        }))
    }

    /// RM3's relevance model of a merged window (`crate::features::prf`): the feedback
    /// documents are the window's top `fb_docs`, read on their shards; the model is
    /// estimated once, and the statistics of its expansion terms gathered from every shard
    /// and added to `stats`.
    pub fn relevance_model(
        &self,
        searchers: &[Searcher],
        stats: &GlobalStats,
        text: &str,
        window: &[MergedHit],
    ) -> Result<(Option<features::prf::Rm3Query>, GlobalStats), SearchError> {
        let config = &self.shards[0].index.config;
        let fb = config.models.rm3.fb_docs.min(window.len());
        let mut feedback = Vec::with_capacity(fb);
        for h in &window[..fb] {
            let engine = &self.shards[h.shard];
            let c = features::Candidate {
                address: h.hit.address,
                score: h.hit.score,
            };
            feedback.extend(features::prf::feedback_docs(
                &engine.index,
                &searchers[h.shard],
                &[c],
            )?);
        }
        let index = &self.shards[0].index;
        let schema = index.index.schema();
        let source = stats.source(&schema);
        let rm = features::prf::estimate(
            config,
            index.fields.all,
            &Stats::new(&source),
            text,
            &feedback,
        )?;
        let mut stats = stats.clone();
        if let Some(rm) = &rm {
            let request = rm.stats_request();
            let mut extra = GlobalStats::default();
            for (engine, searcher) in self.shards.iter().zip(searchers) {
                let schema = engine.index.index.schema();
                extra.add(&GlobalStats::gather(searcher, &schema, &request)?);
            }
            stats.extend(extra);
        }
        Ok((rm, stats))
    }

    /// The feature rows of a merged window, in window order: each shard extracts the rows of
    /// its own documents with the collection's statistics and their ranks in the window, and
    /// sends its documents' out-links within the window, from which the window features are
    /// computed here, where the window is whole.
    pub fn window_features(
        &self,
        searchers: &[Searcher],
        stats: &GlobalStats,
        text: &str,
        window: &[MergedHit],
        how: features::Extraction,
    ) -> Result<FeatureMatrix, SearchError> {
        let set = features::FeatureSet::current();
        let cols = set.len();
        let links: Vec<_> = self.shards.iter().map(Engine::links).collect();
        // Each row's whole-graph node, from its shard's link scores.
        let mut rows_nodes: Vec<(usize, u32)> = Vec::new();
        for (i, h) in window.iter().enumerate() {
            if let Some(l) = &links[h.shard] {
                if let Some(node) = l.nodes_of(&searchers[h.shard], &[h.hit.address])?[0] {
                    rows_nodes.push((i, l.scores.global(node)));
                }
            }
        }
        let window_nodes = features::link::window_nodes(rows_nodes.iter().map(|&(_, u)| u));
        // Each row's out-links within the window, from its shard.
        let mut out_of: Vec<Vec<u32>> = vec![Vec::new(); window.len()];
        let (rm3, stats) = match how.prf {
            features::Prf::Compute => self.relevance_model(searchers, stats, text, window)?,
            features::Prf::Skip => (None, stats.clone()),
        };
        let stats = &stats;
        let mut out = FeatureMatrix {
            rows: window.len(),
            cols,
            values: vec![0.0; window.len() * cols],
        };
        for (shard, (engine, searcher)) in self.shards.iter().zip(searchers).enumerate() {
            let rows: Vec<usize> = (0..window.len())
                .filter(|&i| window[i].shard == shard)
                .collect();
            if rows.is_empty() {
                continue;
            }
            let docs: Vec<_> = rows
                .iter()
                .map(|&i| (window[i].hit.address, window[i].hit.score, i + 1))
                .collect();
            let schema = engine.index.index.schema();
            let source = stats.source(&schema);
            let (m, out_links) = engine.shard_features(
                searcher,
                &Stats::new(&source),
                text,
                &docs,
                &window_nodes,
                rm3.as_ref(),
                links[shard].as_deref(),
                how,
            )?;
            for ((k, &i), links) in rows.iter().enumerate().zip(out_links) {
                out.values[i * cols..(i + 1) * cols].copy_from_slice(m.row(k));
                out_of[i] = links;
            }
        }
        let linked: Vec<(usize, u32, &[u32])> = rows_nodes
            .iter()
            .map(|&(i, u)| (i, u, out_of[i].as_slice()))
            .collect();
        features::link::window_columns(set, &linked, &mut out);
        Ok(out)
    }
}
