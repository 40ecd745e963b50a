//! Computing the documents' vectors: what text stands for a document, and the job that embeds
//! every live document of an index that has no current vector.
//!
//! A document is embedded from its title and the start of its prose (the snippet passages
//! indexing already cut, `crate::text::snippet`): a sentence-transformer reads at most 256
//! tokens, and a Rust API page's body runs to megabytes of signatures and code. How much prose
//! is worth embedding was measured on the questions development set (docs/EVALUATION.md,
//! "Dense and hybrid retrieval"); [`DocText::DEFAULT`] is the choice.
//!
//! The job is incremental: a document keeps its stored vector when its id and the hash of its
//! text are unchanged and the embedder is the same ([`super::fingerprint`]), so after a batch of
//! updates only the changed documents are embedded; vectors of deleted documents are dropped.

use std::collections::HashMap;

use tantivy::Searcher;

use super::{DenseError, Vectors};
use crate::embed::AnyEmbedder as Embedder;
use crate::text::TextIndex;

/// What text of a document its vector embeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocText {
    /// The title alone.
    Title,
    /// The title, then the first `n` passages of prose (each at most 200 characters).
    TitleAndPassages(usize),
}

impl DocText {
    /// The measured default (docs/EVALUATION.md, "Dense and hybrid retrieval").
    pub const DEFAULT: DocText = DocText::TitleAndPassages(1);

    /// The name stored in the vector file: vectors of another text are recomputed.
    pub fn name(self) -> String {
        match self {
            DocText::Title => "title".into(),
            DocText::TitleAndPassages(n) => format!("title+passages{n}"),
        }
    }

    /// The text of a document with `title` and encoded snippet `passages`.
    pub fn of(self, title: &str, passages: &[u8]) -> String {
        let mut text = title.trim().to_string();
        if let DocText::TitleAndPassages(n) = self {
            for (_, passage) in crate::text::snippet::decode(passages).take(n) {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(passage);
            }
        }
        text
    }
}

impl std::str::FromStr for DocText {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "title" {
            return Ok(DocText::Title);
        }
        s.strip_prefix("title+passages")
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|&n| (1..=20).contains(&n))
            .map(DocText::TitleAndPassages)
            .ok_or_else(|| {
                format!("unknown document text `{s}` (known: title, title+passagesN, N in 1..=20)")
            })
    }
}

/// Every live document of `searcher`: id and text, in id order (an id appears once).
pub fn documents(
    index: &TextIndex,
    searcher: &Searcher,
    text: DocText,
) -> Result<Vec<(String, String)>, DenseError> {
    let columns = index.doc_columns(searcher)?;
    let mut docs = Vec::with_capacity(searcher.num_docs() as usize);
    let mut buf = Vec::new();
    for (segment, reader) in searcher.segment_readers().iter().enumerate() {
        for doc in reader.doc_ids_alive() {
            let hit = columns.hit(tantivy::DocAddress::new(segment as u32, doc), &mut buf)?;
            docs.push((hit.id.to_string(), text.of(hit.title, hit.passages)));
        }
    }
    docs.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    docs.dedup_by(|a, b| a.0 == b.0);
    Ok(docs)
}

/// What a run of the job did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct BuildReport {
    /// Documents with a vector afterwards.
    pub vectors: usize,
    /// Of those, embedded in this run.
    pub embedded: usize,
    /// Kept from the previous vectors.
    pub reused: usize,
    /// Previous vectors of documents that are gone.
    pub dropped: usize,
}

/// How many texts go to the embedder at once: texts are sorted by length first, so each of
/// the embedder's batches pads little; progress is reported after each chunk.
const CHUNK: usize = 256;

/// The vectors of `docs` (id order, from [`documents`]) by `embedder` (whose fingerprint is
/// `model`), keeping `previous` vectors whose id, text and embedder are unchanged;
/// `progress(done, total)` after each chunk of texts embedded.
pub fn build(
    docs: &[(String, String)],
    embedder: &Embedder,
    model: &str,
    text: DocText,
    previous: Option<&Vectors>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Vectors, BuildReport), DenseError> {
    let dim = embedder.dim();
    let previous = previous.filter(|p| p.model == model && p.text == text.name() && p.dim == dim);
    let old: HashMap<&str, usize> = previous
        .map(|p| {
            p.ids
                .iter()
                .enumerate()
                .map(|(row, id)| (id.as_str(), row))
                .collect()
        })
        .unwrap_or_default();
    let hashes: Vec<u64> = docs.iter().map(|(_, t)| super::text_hash(t)).collect();
    let mut data = vec![0.0f32; docs.len() * dim];
    let mut todo: Vec<usize> = Vec::new();
    for (i, (id, _)) in docs.iter().enumerate() {
        match (previous, old.get(id.as_str())) {
            (Some(p), Some(&row)) if p.text_hashes[row] == hashes[i] => {
                data[i * dim..(i + 1) * dim].copy_from_slice(p.row(row));
            }
            _ => todo.push(i),
        }
    }
    let reused = docs.len() - todo.len();
    let dropped = previous.map_or(0, |p| p.len()) - reused;
    todo.sort_by_key(|&i| std::cmp::Reverse(docs[i].1.len()));
    progress(0, todo.len());
    let mut done = 0;
    for chunk in todo.chunks(CHUNK) {
        let texts: Vec<&str> = chunk.iter().map(|&i| docs[i].1.as_str()).collect();
        for (&i, v) in chunk.iter().zip(embedder.embed_batch(&texts)?) {
            data[i * dim..(i + 1) * dim].copy_from_slice(&v);
        }
        done += chunk.len();
        progress(done, todo.len());
    }
    // A static embedder gives a text with no token it knows the zero vector: such a
    // document has no meaning to compare, so no vector (it is embedded again next run).
    let keep: Vec<usize> = (0..docs.len())
        .filter(|&i| data[i * dim..(i + 1) * dim].iter().any(|&x| x != 0.0))
        .collect();
    let vectors = Vectors {
        model: model.to_string(),
        model_dir: embedder.dir().display().to_string(),
        text: text.name(),
        dim,
        ids: keep.iter().map(|&i| docs[i].0.clone()).collect(),
        text_hashes: keep.iter().map(|&i| hashes[i]).collect(),
        data: keep
            .iter()
            .flat_map(|&i| data[i * dim..(i + 1) * dim].iter().copied())
            .collect(),
    };
    let report = BuildReport {
        vectors: vectors.len(),
        embedded: todo.len(),
        reused,
        dropped,
    };
    Ok((vectors, report))
}

/// Brings the vector file of the index in `data_dir` up to date with the index's live
/// documents and returns the vectors: reads the stored ones (a damaged file is recomputed
/// whole, and said so through `warn`), then [`update_from`] them.
pub fn update(
    data_dir: &std::path::Path,
    index: &TextIndex,
    embedder: &Embedder,
    text: DocText,
    warn: &mut dyn FnMut(String),
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Vectors, BuildReport), DenseError> {
    let previous = match super::store::read(&super::store::path(data_dir)) {
        Ok(p) => p,
        Err(e @ DenseError::Corrupt { .. }) => {
            warn(format!("{e}; every document is embedded again"));
            None
        }
        Err(e) => return Err(e),
    };
    let model = super::fingerprint(embedder.dir())?;
    update_from(
        data_dir,
        index,
        embedder,
        &model,
        text,
        previous.as_ref(),
        progress,
    )
}

/// The vectors of the index's live documents from `previous` (what the vector file of
/// `data_dir` holds, already in memory) and `embedder` (whose fingerprint is `model`), the
/// file written atomically when anything changed. The server's job calls this with the
/// vectors it serves, so a change of the index neither re-reads the file nor re-hashes the
/// model.
pub fn update_from(
    data_dir: &std::path::Path,
    index: &TextIndex,
    embedder: &Embedder,
    model: &str,
    text: DocText,
    previous: Option<&Vectors>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(Vectors, BuildReport), DenseError> {
    let searcher = index.reader.searcher();
    let docs = documents(index, &searcher, text)?;
    let (vectors, report) = build(&docs, embedder, model, text, previous, progress)?;
    if previous != Some(&vectors) {
        super::store::write(&super::store::path(data_dir), &vectors)?;
    }
    Ok((vectors, report))
}
