//! Link scores of an index: computed from its documents' links (SPEC §2, `crate::graph`),
//! stored beside it (`DATA/link_scores.json`, tied to the index's commit by a generation key)
//! and loaded for serving, so `/search`, `/doc` and `/similar` read them without recomputing.

use crate::sync::Recover;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use tantivy::columnar::StrColumn;
use tantivy::index::SegmentId;
use tantivy::{DocAddress, Searcher, TantivyDocument};

use crate::corpus::Document;
use crate::graph::simrank::SimRankIndex;
use crate::graph::{self, sidecar, BuildOptions, Csr, DocLinks, LinkScoreOptions, LinkScores};
use crate::text::TextIndex;

/// The scores and the graph of one index, ready for serving. A node here is an entry of
/// `scores`: with the whole graph the graph's node, with a shard's part
/// ([`LinkScores::part`]) an entry of the part ([`LinkScores::global`] names its node).
pub struct LinkData {
    pub scores: LinkScores,
    /// The whole graph and SimRank's index; `None` for a shard's part, which holds its own
    /// nodes' out-links only.
    whole: Option<WholeGraph>,
    by_key: HashMap<String, u32>,
    /// Per index segment: its `id` column and the graph node of each of the column's term
    /// ordinals (`u32::MAX` outside the graph), built on first use. Segments never change
    /// their documents, so an entry stays valid as long as these scores are served; keeping
    /// the column saves reopening it for every window (candidates alternate between
    /// segments, and reopening cost ~5% of a default search). Entries of segments the
    /// searcher no longer has (merged away, or all deleted) are dropped when a new segment
    /// is added: each holds its segment's files open, so under steady ingest without graph
    /// jobs the cache would otherwise grow without bound and keep dead segments on disk.
    segment_nodes: Mutex<HashMap<SegmentId, SegmentNodes>>,
}

/// What only the whole graph allows.
pub struct WholeGraph {
    pub graph: Csr,
    /// What `/similar`'s single-source SimRank reads besides the graph (SPEC §2.4).
    pub simrank: SimRankIndex,
}

/// The `id` column of one segment and the graph node of each of its term ordinals.
#[derive(Clone)]
struct SegmentNodes {
    column: StrColumn,
    table: Arc<Vec<u32>>,
}

impl LinkData {
    pub fn new(scores: LinkScores) -> anyhow::Result<Self> {
        let whole = match scores.part {
            Some(_) => None,
            None => {
                let graph = scores.graph()?;
                let simrank = SimRankIndex::new(&graph, scores.simrank.clone())?;
                Some(WholeGraph { graph, simrank })
            }
        };
        let by_key = scores
            .keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.clone(), i as u32))
            .collect();
        Ok(LinkData {
            scores,
            whole,
            by_key,
            segment_nodes: Mutex::new(HashMap::new()),
        })
    }

    pub fn node(&self, doc_id: &str) -> Option<u32> {
        self.by_key.get(doc_id).copied()
    }

    /// The whole graph, unless these scores are a shard's part.
    pub fn whole(&self) -> Option<&WholeGraph> {
        self.whole.as_ref()
    }

    /// The out-links of `node` (an entry of these scores) that end inside `window` (whole-graph
    /// nodes, ascending), as whole-graph nodes: the node's edges in a window's link subgraph.
    pub fn window_links(&self, node: u32, window: &[u32]) -> Vec<u32> {
        self.scores
            .out_links(node)
            .iter()
            .copied()
            .filter(|v| window.binary_search(v).is_ok())
            .collect()
    }

    /// The graph node of each document (`None` outside the graph), without reading stored
    /// documents: the id column's term ordinal is mapped through a per-segment table.
    pub fn nodes_of(
        &self,
        searcher: &Searcher,
        docs: &[DocAddress],
    ) -> tantivy::Result<Vec<Option<u32>>> {
        let mut segments: Vec<Option<Option<SegmentNodes>>> =
            vec![None; searcher.segment_readers().len()];
        let mut out = Vec::with_capacity(docs.len());
        for d in docs {
            let slot = &mut segments[d.segment_ord as usize];
            if slot.is_none() {
                *slot = Some(self.segment_nodes(searcher, d.segment_ord)?);
            }
            let node = slot.as_ref().expect("set above").as_ref().and_then(|s| {
                s.column
                    .term_ords(d.doc_id)
                    .next()
                    .and_then(|ord| s.table.get(ord as usize).copied())
                    .filter(|&n| n != u32::MAX)
            });
            out.push(node);
        }
        Ok(out)
    }

    /// The cached [`SegmentNodes`] of a segment of `searcher`; `None` for a segment without
    /// an `id` column.
    fn segment_nodes(
        &self,
        searcher: &Searcher,
        segment_ord: u32,
    ) -> tantivy::Result<Option<SegmentNodes>> {
        let reader = searcher.segment_reader(segment_ord);
        let segment = reader.segment_id();
        if let Some(t) = self
            .segment_nodes
            .lock()
            .expect("not poisoned")
            .get(&segment)
        {
            return Ok(Some(t.clone()));
        }
        let Some(column) = reader.fast_fields().str("id")? else {
            return Ok(None);
        };
        // Streaming the dictionary decodes each block once (a lookup per ordinal would
        // decompress a block per document).
        let mut table = Vec::with_capacity(column.dictionary().num_terms());
        let mut stream = column.dictionary().stream()?;
        while stream.advance() {
            let key = String::from_utf8_lossy(stream.key());
            table.push(self.node(&key).unwrap_or(u32::MAX));
        }
        let nodes = SegmentNodes {
            column,
            table: Arc::new(table),
        };
        let mut cache = self.segment_nodes.locked();
        cache.retain(|id, _| {
            searcher
                .segment_readers()
                .iter()
                .any(|r| r.segment_id() == *id)
        });
        cache.insert(segment, nodes.clone());
        Ok(Some(nodes))
    }

    /// The stored scores of one node (`None` outside the graph).
    pub fn scores_of(&self, node: Option<u32>) -> Option<NodeScores> {
        let i = node? as usize;
        let s = &self.scores;
        Some(NodeScores {
            pagerank: s.pagerank[i],
            inverse_pagerank: s.inverse_pagerank[i],
            trustrank: s.trustrank[i],
            spam_mass: s.spam_mass[i],
            hits_hub: s.hits_hub[i],
            hits_authority: s.hits_authority[i],
            salsa_hub: s.salsa_hub[i],
            salsa_authority: s.salsa_authority[i],
            in_degree: s.in_degree[i],
            out_degree: s.out_degree[i],
        })
    }

    /// SPEC §1.8 static boost: `λ·ln(ε + pagerank·N)` (0 for documents outside the graph).
    pub fn pagerank_boost_of(&self, node: Option<u32>, weight: f32) -> f32 {
        const EPSILON: f64 = 1e-3;
        match node {
            Some(n) => {
                let pr = self.scores.pagerank[n as usize] * self.scores.total_nodes() as f64;
                weight * (EPSILON + pr).ln() as f32
            }
            None => 0.0,
        }
    }
}

/// One document's stored link scores (SPEC §2), as `/doc` and explanations show them.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct NodeScores {
    pub pagerank: f64,
    pub inverse_pagerank: f64,
    pub trustrank: f64,
    pub spam_mass: f64,
    pub hits_hub: f64,
    pub hits_authority: f64,
    pub salsa_hub: f64,
    pub salsa_authority: f64,
    pub in_degree: u32,
    pub out_degree: u32,
}

pub(crate) fn sidecar_path(index: &TextIndex) -> PathBuf {
    index.dir.join(SIDECAR_NAME)
}

/// The link scores' file in a data directory.
pub(crate) const SIDECAR_NAME: &str = "link_scores.json";

/// Identifies the index commit the scores belong to: any ingest or delete changes it.
pub(crate) fn generation_key(index: &TextIndex) -> anyhow::Result<String> {
    let m = index.manifest()?;
    Ok(format!(
        "{}:{}:{}",
        m.analysis_hash, m.num_docs, m.updated_at
    ))
}

/// Every live document's id, URL and out-links, read from the stores of the searchers'
/// point-in-time views (one index, or every shard of a collection), sorted by id: the graph
/// numbers its nodes in this order, so the node numbers, and the floats summed in their
/// order, depend on the collection only, not on how it is split over shards.
/// Each document comes with the part it was read from.
fn link_documents(parts: &[(&TextIndex, &Searcher)]) -> anyhow::Result<Vec<(Document, usize)>> {
    let mut docs = Vec::new();
    for (part, (index, searcher)) in parts.iter().enumerate() {
        for reader in searcher.segment_readers() {
            let store = reader.get_store_reader(64)?;
            for doc_id in reader.doc_ids_alive() {
                let t: TantivyDocument = store.get(doc_id)?;
                let d = index.stored(&t);
                let doc = Document {
                    id: d.id,
                    url: d.url,
                    links: d.links,
                    ..Default::default()
                };
                docs.push((doc, part));
            }
        }
    }
    docs.sort_by(|a, b| a.0.id.cmp(&b.0.id));
    Ok(docs)
}

/// Computes every score over the documents of all `shards` (the graph of the whole
/// collection) and stores beside each shard, under its own generation, its part
/// ([`LinkScores::part`]): its documents' scores and out-links, numbered as in the whole
/// graph. A leaf then holds 1/S of the scores, and the window features of a sharded window
/// are computed on the subgraph its shards' out-links give, the same subgraph the single
/// index would use. Returns the whole graph's scores.
pub fn compute_and_store_sharded(
    shards: &[TextIndex],
    options: &LinkScoreOptions,
    trusted: Option<&[String]>,
    progress: &mut dyn FnMut(graph::scores::Progress),
) -> anyhow::Result<(LinkScores, graph::build::BuildStats)> {
    let generations = shards
        .iter()
        .map(generation_key)
        .collect::<anyhow::Result<Vec<_>>>()?;
    let searchers: Vec<Searcher> = shards.iter().map(|i| i.reader.searcher()).collect();
    let parts: Vec<(&TextIndex, &Searcher)> = shards.iter().zip(&searchers).collect();
    let never = std::sync::atomic::AtomicBool::new(false);
    let (scores, stats, parts) = compute_parts(
        link_documents(&parts)?,
        shards.len(),
        options,
        trusted,
        progress,
        &never,
    )?;
    for ((index, generation), part) in shards.iter().zip(&generations).zip(&parts) {
        store(index, generation, part)?;
    }
    Ok((scores, stats))
}

/// Every score over the documents of `parts` parts of a collection (each document with the
/// part it belongs to, sorted by id: [`link_documents`], or the shards' answers to a root's
/// graph job), and each part's share ([`LinkScores::part`]), in part order.
pub fn compute_parts(
    docs: Vec<(Document, usize)>,
    parts: usize,
    options: &LinkScoreOptions,
    trusted: Option<&[String]>,
    progress: &mut dyn FnMut(graph::scores::Progress),
    cancel: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<(LinkScores, graph::build::BuildStats, Vec<LinkScores>)> {
    let (csr, keys, stats, owners) = link_graph_of(&docs)?;
    let options = with_trusted(&keys, options, trusted)?;
    let scores = graph::compute_link_scores_cancellable(&csr, keys, &options, progress, cancel)?;
    let mut nodes: Vec<Vec<u32>> = vec![Vec::new(); parts];
    for (node, owner) in owners.iter().enumerate() {
        if let Some(owner) = owner {
            nodes[*owner].push(node as u32);
        }
    }
    let parts = nodes
        .iter()
        .map(|n| scores.part(n))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((scores, stats, parts))
}

/// Every live document's id, URL and out-links in `searcher` (a point-in-time view of
/// `index`), sorted by id: what a leaf gives a root's graph job.
pub fn link_docs(index: &TextIndex, searcher: &Searcher) -> anyhow::Result<Vec<Document>> {
    Ok(link_documents(&[(index, searcher)])?
        .into_iter()
        .map(|(d, _)| d)
        .collect())
}

/// Builds the link graph of `index`, computes every score and stores them atomically.
/// `trusted` are operator-chosen TrustRank seeds by document id (SPEC §2.5); `None` takes
/// the options' default choice.
pub fn compute_and_store(
    index: &TextIndex,
    options: &LinkScoreOptions,
    trusted: Option<&[String]>,
    progress: &mut dyn FnMut(graph::scores::Progress),
) -> anyhow::Result<(LinkScores, graph::build::BuildStats)> {
    let generation = generation_key(index)?;
    let never = std::sync::atomic::AtomicBool::new(false);
    let searcher = index.reader.searcher();
    let (scores, stats) = compute(index, &searcher, options, trusted, progress, &never)?;
    store(index, &generation, &scores)?;
    Ok((scores, stats))
}

/// Writes `scores`, computed for the index at `generation` ([`generation_key`]), beside the
/// index: atomically (`graph::sidecar`), so a reader finds the old file or the new one.
pub fn store(index: &TextIndex, generation: &str, scores: &LinkScores) -> anyhow::Result<()> {
    sidecar::write(&sidecar_path(index), generation, scores)?;
    Ok(())
}

/// Builds the link graph of the documents `searcher` sees (a point-in-time view of `index`:
/// commits made meanwhile do not change it) and computes every score without storing them;
/// stops with [`graph::GraphError::Cancelled`] between algorithms once `cancel` is set.
pub fn compute(
    index: &TextIndex,
    searcher: &Searcher,
    options: &LinkScoreOptions,
    trusted: Option<&[String]>,
    progress: &mut dyn FnMut(graph::scores::Progress),
    cancel: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<(LinkScores, graph::build::BuildStats)> {
    let (csr, keys, stats, _) = link_graph(&[(index, searcher)])?;
    let options = with_trusted(&keys, options, trusted)?;
    let scores = graph::compute_link_scores_cancellable(&csr, keys, &options, progress, cancel)?;
    Ok((scores, stats))
}

/// [`compute`] on timely dataflow (`graph::dataflow`): this process's part of a job over
/// `cluster`, every process reading the same index. Process 0 gets the scores (SimRank's
/// diagonal, which the job does not compute, is added there by the CSR engine); the others
/// get `None`. Nothing is stored.
pub(crate) fn compute_on_dataflow(
    index: &TextIndex,
    options: &LinkScoreOptions,
    trusted: Option<&[String]>,
    cluster: &graph::dataflow::Cluster,
    checkpointing: Option<&graph::dataflow::Checkpointing>,
    progress: Option<graph::dataflow::ProgressFn>,
) -> anyhow::Result<(Option<LinkScores>, graph::dataflow::JobReport)> {
    let searcher = index.reader.searcher();
    let (csr, keys, _, _) = link_graph(&[(index, &searcher)])?;
    let options = with_trusted(&keys, options, trusted)?;
    let csr = std::sync::Arc::new(csr);
    let mut report = graph::dataflow::run(
        &graph::dataflow::Input::Graph(csr.clone()),
        &options,
        cluster,
        checkpointing,
        progress,
    )?;
    let scores = report
        .scores
        .take()
        .map(|s| s.into_link_scores(&csr, keys, &options))
        .transpose()?;
    Ok((scores, report))
}

/// The link graph of the documents the searchers see, with each node's document id and the
/// part (of `parts`) it was read from (`None` for a link target that is no document).
#[allow(clippy::type_complexity)]
fn link_graph(
    parts: &[(&TextIndex, &Searcher)],
) -> anyhow::Result<(
    Csr,
    Vec<String>,
    graph::build::BuildStats,
    Vec<Option<usize>>,
)> {
    link_graph_of(&link_documents(parts)?)
}

/// [`link_graph`] of documents already read, each with its part, sorted by id.
#[allow(clippy::type_complexity)]
fn link_graph_of(
    docs: &[(Document, usize)],
) -> anyhow::Result<(
    Csr,
    Vec<String>,
    graph::build::BuildStats,
    Vec<Option<usize>>,
)> {
    let lg = graph::build_link_graph(
        docs.iter().map(|(d, _)| DocLinks::from(d)),
        &BuildOptions::default(),
    )?;
    let keys: Vec<String> = lg.nodes.iter().map(|n| n.key.clone()).collect();
    let part_of: HashMap<&str, usize> = docs.iter().map(|(d, p)| (d.id.as_str(), *p)).collect();
    let owners = keys
        .iter()
        .map(|k| part_of.get(k.as_str()).copied())
        .collect();
    Ok((lg.to_csr(), keys, lg.stats, owners))
}

/// `options` with operator-chosen TrustRank seeds (document ids) when there are any.
fn with_trusted(
    keys: &[String],
    options: &LinkScoreOptions,
    trusted: Option<&[String]>,
) -> anyhow::Result<LinkScoreOptions> {
    let mut options = options.clone();
    if let Some(ids) = trusted {
        let node: HashMap<&str, u32> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.as_str(), i as u32))
            .collect();
        let seeds = ids
            .iter()
            .map(|id| {
                node.get(id.as_str()).copied().ok_or_else(|| {
                    crate::error::Invalid(format!(
                        "TrustRank seed {id:?} is not a document of the index"
                    ))
                })
            })
            .collect::<Result<Vec<u32>, _>>()?;
        options.seeds = graph::SeedChoice::Operator(seeds);
    }
    Ok(options)
}

/// Loads the stored scores if they belong to the index as it is now.
pub fn load(index: &TextIndex) -> anyhow::Result<Option<LinkData>> {
    let path = sidecar_path(index);
    if !path.exists() {
        return Ok(None);
    }
    let scores = sidecar::read(&path, Some(&generation_key(index)?))
        .with_context(|| "link scores do not match the index; run `rankd graph`")?;
    Ok(Some(LinkData::new(scores)?))
}

/// Loads the stored scores for serving even when the index changed after they were computed:
/// scores are attached to documents by id, so the documents they still describe keep them
/// and the others get the features' defaults. The flag says whether they are stale (written
/// for another version of the index); the operator sees it in `GET /admin/graph` and
/// `/metrics`.
pub fn load_for_serving(index: &TextIndex) -> anyhow::Result<Option<(LinkData, bool)>> {
    let path = sidecar_path(index);
    if !path.exists() {
        return Ok(None);
    }
    let written_for = sidecar::manifest_hash(&path)?;
    let scores = sidecar::read(&path, None)?;
    let stale = written_for != generation_key(index)?;
    Ok(Some((LinkData::new(scores)?, stale)))
}

/// How well served link scores cover the index as it is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Coverage {
    /// Live documents.
    pub documents: usize,
    /// Live documents that are not nodes of the scores' graph (added since).
    pub uncovered_documents: usize,
    /// Nodes of the scores' graph that are no longer live documents (deleted since).
    pub removed_documents: usize,
}

impl LinkData {
    /// Compares the scores' graph with the live documents of `searcher` (one pass over the
    /// id column; no stored document is read).
    pub fn coverage(&self, searcher: &Searcher) -> tantivy::Result<Coverage> {
        let mut docs = Vec::with_capacity(searcher.num_docs() as usize);
        for (ord, reader) in searcher.segment_readers().iter().enumerate() {
            docs.extend(
                reader
                    .doc_ids_alive()
                    .map(|d| DocAddress::new(ord as u32, d)),
            );
        }
        let mut covered = vec![false; self.scores.n()];
        let mut uncovered = 0;
        for node in self.nodes_of(searcher, &docs)? {
            match node {
                Some(n) => covered[n as usize] = true,
                None => uncovered += 1,
            }
        }
        Ok(Coverage {
            documents: docs.len(),
            uncovered_documents: uncovered,
            removed_documents: covered.iter().filter(|&&c| !c).count(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    fn doc(id: &str, links: &[String]) -> Document {
        Document {
            id: id.into(),
            title: format!("page {id}"),
            body: "rust search ranking".into(),
            links: links.to_vec(),
            ..Default::default()
        }
    }

    /// Under steady ingest (every commit a new segment, merges retiring old ones) the
    /// per-segment cache holds the searcher's live segments only, and still maps every
    /// document to its node.
    #[test]
    fn segment_cache_keeps_only_live_segments() {
        let dir = tempfile::tempdir().unwrap();
        let index = TextIndex::open_or_create(dir.path(), None).unwrap();
        let n = 20;
        index
            .upsert((0..n).map(|i| doc(&format!("d{i}"), &[format!("d{}", (i + 1) % n)])))
            .unwrap();
        let searcher = index.reader.searcher();
        let never = AtomicBool::new(false);
        let options = LinkScoreOptions::default();
        let (scores, _) = compute(&index, &searcher, &options, None, &mut |_| {}, &never).unwrap();
        let data = LinkData::new(scores).unwrap();
        let mut most = 0;
        for batch in 0..30 {
            index
                .upsert((0..3).map(|i| doc(&format!("d{}", (batch * 3 + i) % n), &[])))
                .unwrap();
            let searcher = index.reader.searcher();
            let all: Vec<DocAddress> = searcher
                .segment_readers()
                .iter()
                .enumerate()
                .flat_map(|(s, r)| r.doc_ids_alive().map(move |d| DocAddress::new(s as u32, d)))
                .collect();
            let nodes = data.nodes_of(&searcher, &all).unwrap();
            assert_eq!(nodes.iter().flatten().count(), n, "batch {batch}");
            let cached = data.segment_nodes.lock().unwrap().len();
            let live = searcher.segment_readers().len();
            assert!(
                cached <= live,
                "batch {batch}: {cached} cached, {live} live segments"
            );
            most = most.max(cached);
        }
        assert!(most >= 2, "the test must see several segments ({most})");
    }
}
