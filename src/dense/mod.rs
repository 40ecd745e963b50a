//! Dense retrieval (SPEC §10): every document of an index gets a unit vector from a sentence
//! embedder (`crate::embed`), and a query's nearest documents by dot product become a first
//! phase of their own (`model=dense`) or one input of a fusion (`model=hybrid`,
//! `crate::search`).
//!
//! - [`Vectors`] are the documents' vectors as stored ([`store`], `vectors.bin` beside the
//!   index), keyed by document id with a hash of the text each embeds, so that updating the
//!   vectors after documents change re-embeds only what changed ([`build`]).
//! - [`DenseIndex`] serves them: for each searcher (index generation) it maps rows to live
//!   document addresses ([`Rows`], built once per set of segments, as `crate::text::columns`
//!   caches its columns), so a deleted document is never a hit.
//! - The nearest documents are found by an exact scan, every live row's dot product with the
//!   query (2 ms on the demo's 32,900 × 384 vectors on one core), or, from [`ann::min_rows`]
//!   documents a query may return (50,000 of 384 dimensions), through usearch's HNSW graph
//!   ([`ann`], which says why that crate, those settings and that threshold; recall@10
//!   0.985–0.990 against the exact scan from 50,000 to 200,000 rows; docs/BENCHMARKS.md,
//!   "Nearest neighbours (issue 33)"), saved beside the vectors (`vectors.graph`) so that a
//!   restart loads it instead of building it again. The dot product is written here
//!   (eight independent sums the compiler turns into SIMD) because the iterator form adds in
//!   order and cannot be vectorised.

pub mod ann;
pub mod build;
pub mod job;
pub mod store;
#[cfg(test)]
pub(crate) mod tests;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use sha2::{Digest, Sha256};
use tantivy::{DocAddress, Searcher};

use crate::sync::Recover;
use crate::text::columns::SearcherCache;
use crate::text::TextIndex;

pub use build::DocText;

/// Why vectors cannot be read, written or computed; every variant names the path at fault.
#[derive(Debug, thiserror::Error)]
pub enum DenseError {
    #[error("{path}: {message}", path = path.display())]
    Corrupt { path: PathBuf, message: String },
    #[error("{path}: {message}", path = path.display())]
    Io { path: PathBuf, message: String },
    #[error(transparent)]
    Embed(#[from] crate::embed::EmbedError),
    #[error("building the nearest-neighbour graph over {rows} vectors: {message}")]
    Ann { rows: usize, message: String },
    #[error("reading the index: {0}")]
    Index(#[from] tantivy::TantivyError),
}

/// The documents' vectors as stored: rows in id order.
#[derive(Debug, Clone, PartialEq)]
pub struct Vectors {
    /// [`fingerprint`] of the embedder that computed them.
    pub model: String,
    pub model_dir: String,
    /// [`DocText::name`] of what each vector embeds.
    pub text: String,
    pub dim: usize,
    pub ids: Vec<String>,
    /// [`text_hash`] of the text each row embeds.
    pub text_hashes: Vec<u64>,
    /// `ids.len() × dim` floats, row after row.
    pub data: Vec<f32>,
}

impl Vectors {
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Row `row`'s vector.
    pub fn row(&self, row: usize) -> &[f32] {
        &self.data[row * self.dim..(row + 1) * self.dim]
    }
}

/// The sha256 of an embedder's directory: every regular file's relative path and bytes, in
/// path order. Stored vectors are used only with the embedder whose fingerprint they carry.
pub fn fingerprint(dir: &Path) -> Result<String, DenseError> {
    let io = |path: &Path, e: &dyn std::fmt::Display| DenseError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let mut files: Vec<PathBuf> = Vec::new();
    for entry in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let entry = entry.map_err(|e| io(dir, &e))?;
        if entry.file_type().is_file() {
            files.push(entry.into_path());
        }
    }
    let mut hasher = Sha256::new();
    for path in files {
        let relative = path.strip_prefix(dir).unwrap_or(&path);
        hasher.update(relative.to_string_lossy().as_bytes());
        hasher.update([0]);
        let mut file = std::fs::File::open(&path).map_err(|e| io(&path, &e))?;
        std::io::copy(&mut file, &mut hasher).map_err(|e| io(&path, &e))?;
    }
    Ok(format!("{:x}", hasher.finalize()))
}

/// The hash of a text a vector embeds (FNV-1a 64: fixed across releases, as it is stored).
pub fn text_hash(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// `a · b`, in eight independent sums (see the module doc).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut sums = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            sums[i] += x[i] * y[i];
        }
    }
    sums.iter().sum::<f32>() + tail
}

/// The `want` rows nearest to `query` among those `allowed`, best first (ties by row, which is id
/// order), with their dot products; and how many rows were allowed. The exact scan: every
/// allowed row's dot product.
pub fn scan(
    vectors: &Vectors,
    query: &[f32],
    want: usize,
    allowed: impl Fn(usize) -> bool,
) -> (Vec<(f32, u32)>, usize) {
    let mut scored: Vec<(f32, u32)> = Vec::with_capacity(vectors.len());
    for row in 0..vectors.len() {
        if allowed(row) {
            scored.push((dot(query, vectors.row(row)), row as u32));
        }
    }
    let ranked = scored.len();
    let want = want.min(ranked);
    if want < ranked && want > 0 {
        scored.select_nth_unstable_by(want - 1, by_score);
    }
    scored.truncate(want);
    scored.sort_unstable_by(by_score);
    (scored, ranked)
}

/// Best first, ties by row.
fn by_score(a: &(f32, u32), b: &(f32, u32)) -> std::cmp::Ordering {
    b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
}

/// The live document of each row in one searcher.
pub struct Rows {
    /// Per row: the live document with its id, if any.
    address: Vec<Option<DocAddress>>,
    /// Per row: the document's language code (`crate::corpus::lang::code`), 0 for none.
    lang: Vec<u64>,
    /// Per segment, per document: its row, `u32::MAX` for none (the dense feature's lookup).
    row_of: Vec<Vec<u32>>,
    /// Live documents with no vector (added since the vectors were computed).
    missing: usize,
    /// Rows with a live document, in all and per language code.
    live: usize,
    live_by_lang: HashMap<u64, usize>,
}

impl Rows {
    fn new(vectors: &Vectors, searcher: &Searcher) -> tantivy::Result<Rows> {
        let mut address = vec![None; vectors.len()];
        let mut lang = vec![0u64; vectors.len()];
        let mut missing = 0usize;
        for (segment, reader) in searcher.segment_readers().iter().enumerate() {
            let ff = reader.fast_fields();
            let ids = ff.str("id")?;
            let langs = ff.u64("lang").ok();
            let Some(ids) = ids else {
                continue;
            };
            // The segment's dictionary and the rows are both in id order: one merge gives
            // each ordinal its row.
            let mut row_of_ord = vec![u32::MAX; ids.num_terms()];
            let mut stream = ids.dictionary().stream()?;
            let mut next = 0usize;
            while stream.advance() {
                let key = stream.key();
                while next < vectors.len() && vectors.ids[next].as_bytes() < key {
                    next += 1;
                }
                if next < vectors.len() && vectors.ids[next].as_bytes() == key {
                    row_of_ord[stream.term_ord() as usize] = next as u32;
                }
            }
            for doc in reader.doc_ids_alive() {
                let Some(ord) = ids.term_ords(doc).next() else {
                    continue;
                };
                let row = row_of_ord[ord as usize];
                if row == u32::MAX {
                    missing += 1;
                    continue;
                }
                address[row as usize] = Some(DocAddress::new(segment as u32, doc));
                if let Some(l) = langs.as_ref().and_then(|c| c.first(doc)) {
                    lang[row as usize] = l;
                }
            }
        }
        Ok(Rows::counted(address, lang, missing))
    }

    /// The tables of rows whose live documents are `address` (with languages `lang`): the
    /// live counts and each document's row.
    fn counted(address: Vec<Option<DocAddress>>, lang: Vec<u64>, missing: usize) -> Rows {
        let mut live_by_lang: HashMap<u64, usize> = HashMap::new();
        let mut row_of: Vec<Vec<u32>> = Vec::new();
        for (row, (a, l)) in address.iter().zip(&lang).enumerate() {
            if let Some(a) = a {
                *live_by_lang.entry(*l).or_default() += 1;
                let (segment, doc) = (a.segment_ord as usize, a.doc_id as usize);
                if row_of.len() <= segment {
                    row_of.resize(segment + 1, Vec::new());
                }
                let docs = &mut row_of[segment];
                if docs.len() <= doc {
                    docs.resize(doc + 1, u32::MAX);
                }
                docs[doc] = row as u32;
            }
        }
        Rows {
            live: live_by_lang.values().sum(),
            live_by_lang,
            address,
            lang,
            row_of,
            missing,
        }
    }

    /// The row of a live document, if it has a vector.
    pub fn row_of(&self, address: DocAddress) -> Option<usize> {
        let row = *self
            .row_of
            .get(address.segment_ord as usize)?
            .get(address.doc_id as usize)?;
        (row != u32::MAX).then_some(row as usize)
    }

    /// Live documents without a vector.
    pub fn missing(&self) -> usize {
        self.missing
    }

    /// Live documents with a vector.
    pub fn live(&self) -> usize {
        self.live
    }

    /// Live documents with a vector in language `lang`, or in all when `None`.
    fn live_in(&self, lang: Option<u64>) -> usize {
        lang.map_or(self.live, |l| {
            self.live_by_lang.get(&l).copied().unwrap_or(0)
        })
    }
}

/// Vectors being served, with their nearest-neighbour graph (from [`ann::min_rows`] rows, once
/// built or loaded) and the row tables of the searcher last asked for.
pub struct DenseIndex {
    pub vectors: Vectors,
    /// Set once [`DenseIndex::build_graph`] has run: the graph, or none when it failed.
    ann: OnceLock<Option<ann::Ann>>,
    /// Where the graph is saved and loaded from ([`ann::path`]); none: built, never saved.
    graph_file: Option<PathBuf>,
    /// The fewest allowed rows the graph answers for ([`ann::min_rows`]; lower in tests).
    min_rows: usize,
    rows: SearcherCache<Rows>,
}

impl DenseIndex {
    /// Serves `vectors` with their graph ([`DenseIndex::build_graph`]), never saved.
    pub fn new(vectors: Vectors) -> Self {
        let index = DenseIndex::without_graph(vectors);
        index.build_graph();
        index
    }

    /// Serves `vectors` by the exact scan until [`DenseIndex::build_graph`] has run.
    pub fn without_graph(vectors: Vectors) -> Self {
        DenseIndex {
            min_rows: ann::min_rows(vectors.dim),
            vectors,
            ann: OnceLock::new(),
            graph_file: None,
            rows: SearcherCache::default(),
        }
    }

    /// Keeps the graph in `path` ([`ann::path`] of the data directory): loaded from there when
    /// it was built from these vectors, else built and saved there.
    pub fn with_graph_file(mut self, path: PathBuf) -> Self {
        self.graph_file = Some(path);
        self
    }

    /// Lowers the threshold of the graph, so that tests need not build 50,000 rows.
    #[cfg(test)]
    pub(crate) fn with_min_rows(mut self, rows: usize) -> Self {
        self.min_rows = rows;
        self
    }

    /// Loads or builds the vectors' graph when they are enough for it to be faster than the
    /// exact scan and it is not there yet (seconds to minutes of CPU to build: the embedding
    /// job runs it after installing the index, which the exact scan serves meanwhile). With a
    /// graph file, a graph saved there from these very vectors is loaded (a second where a
    /// build takes a minute); one that is missing, of other vectors or damaged is rebuilt,
    /// said so in the log, and saved. A graph that cannot be built is logged, and the exact
    /// scan keeps serving; one that cannot be saved is logged and served.
    pub fn build_graph(&self) {
        if self.vectors.len() < self.min_rows {
            return;
        }
        self.ann.get_or_init(|| {
            let start = std::time::Instant::now();
            let rows = self.vectors.len();
            let file = self
                .graph_file
                .as_deref()
                .map(|path| (path, ann::vectors_sha256(&self.vectors)));
            if let Some(graph) = file
                .as_ref()
                .and_then(|(path, key)| self.saved_graph(path, key))
            {
                tracing::info!(
                    "document vectors: nearest-neighbour graph over {rows} vectors loaded in \
                     {:.1} s",
                    start.elapsed().as_secs_f64()
                );
                return Some(graph);
            }
            let graph = match ann::Ann::build(&self.vectors) {
                Ok(graph) => graph,
                Err(e) => {
                    tracing::error!("document vectors: {e}; searching by the exact scan");
                    return None;
                }
            };
            tracing::info!(
                "document vectors: nearest-neighbour graph over {rows} vectors built in {:.1} s",
                start.elapsed().as_secs_f64()
            );
            if let Some((path, key)) = &file {
                if let Err(e) = graph.save(path, &self.vectors, key) {
                    tracing::warn!("document vectors: saving the graph: {e}");
                }
            }
            Some(graph)
        });
    }

    /// The graph saved in `path` for these vectors (whose [`ann::vectors_sha256`] is `key`),
    /// if there is one; why there is none is logged.
    fn saved_graph(&self, path: &Path, key: &str) -> Option<ann::Ann> {
        match ann::Ann::load(path, &self.vectors, key) {
            Ok(Some(graph)) => Some(graph),
            Ok(None) => {
                tracing::info!(
                    "document vectors: no nearest-neighbour graph saved in {}; building it",
                    path.display()
                );
                None
            }
            Err(e) => {
                tracing::warn!("document vectors: {e}; building the graph again");
                None
            }
        }
    }

    /// The graph, once built or loaded.
    fn graph(&self) -> Option<&ann::Ann> {
        self.ann.get().and_then(Option::as_ref)
    }

    /// Whether the graph was built or loaded; `None` while there is none.
    pub fn graph_origin(&self) -> Option<ann::Origin> {
        self.graph().map(ann::Ann::origin)
    }

    /// The row tables of `searcher`, built when its segments differ from the last ones.
    pub fn rows(&self, searcher: &Searcher) -> tantivy::Result<Arc<Rows>> {
        self.rows
            .get(searcher, || Rows::new(&self.vectors, searcher))
    }

    /// The `limit` live documents nearest to `query` after the first `skip`, best first (ties
    /// by id), with their dot products; only documents in language `lang` when given. Also
    /// returns how many documents were ranked.
    pub fn nearest(
        &self,
        rows: &Rows,
        query: &[f32],
        limit: usize,
        skip: usize,
        lang: Option<u64>,
    ) -> (Vec<(DocAddress, f32)>, usize) {
        let want = skip.saturating_add(limit);
        let allowed =
            |row: usize| rows.address[row].is_some() && lang.is_none_or(|l| rows.lang[row] == l);
        let ranked = rows.live_in(lang);
        // The graph when the documents allowed are enough for it (else the exact scan, which
        // only scores those, is as fast); the exact scan too when the graph finds fewer than
        // the documents asked for (see `ann`).
        let from_graph = match self.graph() {
            Some(graph) if ranked >= self.min_rows && want <= ann::MAX_WANT => {
                let top = graph.search(&self.vectors, query, want, allowed);
                (top.len() == want).then_some(top)
            }
            _ => None,
        };
        let scored = from_graph.unwrap_or_else(|| scan(&self.vectors, query, want, allowed).0);
        let top = scored
            .into_iter()
            .skip(skip)
            .map(|(s, row)| (rows.address[row as usize].expect("live rows only"), s))
            .collect();
        (top, ranked)
    }
}

/// A query's vector against one searcher's documents: the `dense.similarity` feature of the
/// reranker (`crate::features`), the dot product of the query's and the document's unit
/// vectors, the score `model=dense` ranks by.
#[derive(Clone, Copy)]
pub struct Similarity<'a> {
    pub index: &'a DenseIndex,
    pub rows: &'a Rows,
    pub query: &'a [f32],
}

impl Similarity<'_> {
    /// The similarity of a live document to the query; `None` for a document without a
    /// vector (added since the vectors were computed).
    pub fn of(&self, address: DocAddress) -> Option<f32> {
        let row = self.rows.row_of(address)?;
        Some(dot(self.query, self.index.vectors.row(row)))
    }
}

/// Where the document vectors of a server stand (`GET /admin/embeddings`, `/readyz`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Progress {
    /// No embedder is configured: dense and hybrid search are off.
    Off,
    /// Loading the embedder and the stored vectors.
    Loading,
    /// Embedding the documents that have no vector yet.
    Embedding { done: usize, total: usize },
    /// Every document the last run saw has a vector.
    Ready { vectors: usize },
    /// The last run failed; searches use the vectors served before it, if any.
    Failed { message: String },
}

/// The embedder and vectors a server searches with, and the embedding job's progress.
pub struct Dense {
    pub embedder: Arc<crate::embed::AnyEmbedder>,
    pub index: Arc<DenseIndex>,
}

impl Dense {
    /// The unit vector of a query.
    pub fn embed_query(&self, text: &str) -> Result<Vec<f32>, DenseError> {
        Ok(self.embedder.embed(text)?)
    }
}

/// The progress of the embedding job, shared between the job and the front ends.
#[derive(Default)]
pub struct Status {
    progress: Mutex<Option<Progress>>,
}

impl Status {
    pub fn set(&self, p: Progress) {
        *self.progress.locked() = Some(p);
    }

    pub fn get(&self) -> Progress {
        self.progress.locked().clone().unwrap_or(Progress::Off)
    }
}

/// The stored vectors of `index` with the embedder that computed them, for searching:
/// `embedder` names its directory (else the one the vector file records). `Ok(None)` when
/// the index has no vectors. Vectors from another embedder than the one given are refused:
/// a query must be embedded by the model its documents were. The vectors' graph is loaded
/// from the data directory's graph file, or built (and saved there), before returning.
pub fn load(index: &TextIndex, embedder: Option<&Path>) -> Result<Option<Dense>, DenseError> {
    let dense = load_without_graph(index, embedder)?;
    if let Some(d) = &dense {
        d.index.build_graph();
    }
    Ok(dense)
}

/// [`load`] without building the graph ([`DenseIndex::build_graph`]).
pub fn load_without_graph(
    index: &TextIndex,
    embedder: Option<&Path>,
) -> Result<Option<Dense>, DenseError> {
    let path = store::path(&index.dir);
    let Some(vectors) = store::read(&path)? else {
        return Ok(None);
    };
    let dir = embedder.map_or_else(|| PathBuf::from(&vectors.model_dir), Path::to_path_buf);
    let model = fingerprint(&dir)?;
    if model != vectors.model {
        return Err(DenseError::Corrupt {
            path,
            message: format!(
                "the vectors were computed by the embedder in {} (another model than {}); run \
                 `rankd embed --embedder {}` to compute them with it",
                vectors.model_dir,
                dir.display(),
                dir.display()
            ),
        });
    }
    let embedder = crate::embed::AnyEmbedder::load(&dir)?;
    Ok(Some(Dense {
        embedder: Arc::new(embedder),
        index: Arc::new(DenseIndex::without_graph(vectors).with_graph_file(ann::path(&index.dir))),
    }))
}
