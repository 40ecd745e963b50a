//! Link scores of an index: computed from its documents' links (SPEC §2, `crate::graph`),
//! stored beside it (`DATA/link_scores.json`, tied to the index's commit by a generation key)
//! and loaded for serving, so `/search`, `/doc` and `/similar` read them without recomputing.

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::Context;
use tantivy::TantivyDocument;

use crate::corpus::Document;
use crate::graph::{self, sidecar, BuildOptions, Csr, DocLinks, LinkScoreOptions, LinkScores};
use crate::text::TextIndex;

/// The scores and the graph of one index, ready for serving.
pub struct LinkData {
    pub scores: LinkScores,
    pub graph: Csr,
    by_key: HashMap<String, u32>,
}

impl LinkData {
    pub fn new(scores: LinkScores) -> anyhow::Result<Self> {
        let graph = scores.graph()?;
        let by_key = scores
            .keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.clone(), i as u32))
            .collect();
        Ok(LinkData {
            scores,
            graph,
            by_key,
        })
    }

    pub fn node(&self, doc_id: &str) -> Option<u32> {
        self.by_key.get(doc_id).copied()
    }

    /// The stored scores of one node, by name.
    pub fn of(&self, node: u32) -> serde_json::Value {
        let i = node as usize;
        let s = &self.scores;
        serde_json::json!({
            "pagerank": s.pagerank[i],
            "inverse_pagerank": s.inverse_pagerank[i],
            "trustrank": s.trustrank[i],
            "spam_mass": s.spam_mass[i],
            "hits_hub": s.hits_hub[i],
            "hits_authority": s.hits_authority[i],
            "salsa_hub": s.salsa_hub[i],
            "salsa_authority": s.salsa_authority[i],
            "in_degree": s.in_degree[i],
            "out_degree": s.out_degree[i],
        })
    }

    /// SPEC §1.8 static boost: `λ·ln(ε + pagerank·N)` (0 for documents outside the graph).
    pub fn pagerank_boost(&self, doc_id: &str, weight: f32) -> f32 {
        const EPSILON: f64 = 1e-3;
        match self.node(doc_id) {
            Some(n) => {
                let pr = self.scores.pagerank[n as usize] * self.scores.n() as f64;
                weight * (EPSILON + pr).ln() as f32
            }
            None => 0.0,
        }
    }
}

pub fn sidecar_path(index: &TextIndex) -> PathBuf {
    index.dir.join("link_scores.json")
}

/// Identifies the index commit the scores belong to: any ingest or delete changes it.
pub fn generation_key(index: &TextIndex) -> anyhow::Result<String> {
    let m = index.manifest()?;
    Ok(format!(
        "{}:{}:{}",
        m.analysis_hash, m.num_docs, m.updated_at
    ))
}

/// Every live document's id, URL and out-links, read from the store.
fn link_documents(index: &TextIndex) -> anyhow::Result<Vec<Document>> {
    let searcher = index.reader.searcher();
    let mut docs = Vec::with_capacity(searcher.num_docs() as usize);
    for reader in searcher.segment_readers() {
        let store = reader.get_store_reader(64)?;
        for doc_id in reader.doc_ids_alive() {
            let t: TantivyDocument = store.get(doc_id)?;
            let d = index.stored(&t);
            docs.push(Document {
                id: d.id,
                url: d.url,
                links: d.links,
                ..Default::default()
            });
        }
    }
    Ok(docs)
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
    let docs = link_documents(index)?;
    let lg = graph::build_link_graph(docs.iter().map(DocLinks::from), &BuildOptions::default())?;
    let csr = lg.to_csr();
    let keys: Vec<String> = lg.nodes.iter().map(|n| n.key.clone()).collect();
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
                    crate::cli::BadInput(format!(
                        "TrustRank seed {id:?} is not a document of the index"
                    ))
                })
            })
            .collect::<Result<Vec<u32>, _>>()?;
        options.seeds = graph::SeedChoice::Operator(seeds);
    }
    let scores = graph::compute_link_scores(&csr, keys, &options, progress)?;
    sidecar::write(&sidecar_path(index), &generation_key(index)?, &scores)?;
    Ok((scores, lg.stats))
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
