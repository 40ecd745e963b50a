//! The approximate nearest-neighbour index over the document vectors: usearch's HNSW graph
//! (Unum's single-header C++ library through its own `cxx` binding), loaded or built over every
//! row when vectors are installed (`super::DenseIndex::build_graph`, from [`min_rows`] rows: the
//! embedding job serves new vectors by the exact scan meanwhile), searched by
//! `super::DenseIndex::nearest` when the documents a query may return are at least
//! [`min_rows`]; below that the exact scan answers.
//!
//! Why usearch (`examples/ann_bench.rs`, docs/BENCHMARKS.md "Nearest neighbours (issue 33)":
//! the demo's 32,900 × 384 MiniLM vectors and 798 real queries, one thread, same run): with
//! each crate's usual settings (16 links, 128 candidates when adding, 64 when searching)
//! usearch answered in 0.13 ms (p50, k = 10) against hnsw_rs 0.23 ms, hannoy 0.40 ms and the
//! exact scan 2.08 ms; it was built in 6.6 s, hnsw_rs in 4.4 s and hannoy in 25 s (3.1, 5.5 and
//! 16.8 s in a quieter run); and it has deletes (tombstones), filtered search, save and a
//! memory-mapped view, where hnsw_rs cannot delete and hannoy rebuilds through LMDB. But all
//! three found only 0.70–0.73 of the exact top 10 for these queries (0.99 for the documents'
//! own vectors as queries): short queries sit far from every document, where a graph walk
//! stops early.
//!
//! The settings: 32 links and 256 candidates when adding (twice usearch's defaults), and
//! [`expansion_search`] candidates when searching, 2,048 at 100,000 rows and growing with the
//! square root of the rows. A fixed 1,024 found 0.981 of the exact top 10 on the demo but
//! 0.972 at 100,000 rows (the demo's vectors plus perturbed copies, `--scale`), and the
//! candidates the same recall needs grew about with the square root of the rows (MiniLM:
//! 0.972 with 1,024 at 100,000 and with 1,536 at 200,000; 0.982 with 1,536 at 100,000, 0.980
//! with 2,048 at 200,000). With the rule, recall@10 was 0.985–0.990 and recall@100
//! 0.983–0.990 on the MiniLM and the static (Model2Vec, 256 dims) vectors from the threshold
//! to 200,000 rows, in 0.75–0.82 of the exact scan's time at the threshold and 0.45–0.67 at
//! 100,000 and 200,000 rows (docs/BENCHMARKS.md; e.g. MiniLM at 100,000 rows 3.0 ms against
//! 5.4 ms). More links or candidates when adding were not needed (a rebuild per setting costs
//! minutes; the search expansion alone reached the target).
//!
//! Where the graph answers ([`MIN_FLOATS`]): a graph search's cost hardly depends on the
//! dimension (random reads of linked rows: 1.9 and 2.0 ms at 50,000 rows with 1,536
//! candidates for 384 and 256 dimensions), the exact scan's grows with it (2.85 and 2.03 ms).
//! So the threshold counts the floats the scan would read: 50,000 rows of 384 dimensions,
//! where the graph takes 0.75 of the scan's time, and 78,125 of 256 (0.82), since at 50,000
//! rows the static vectors' graph was no faster than their scan.
//!
//! The graph's keys are row numbers. A search is filtered by the rows the caller allows (live
//! documents, in the query's language), and its hits are scored again with `super::dot`, so a
//! document's score is the one the exact scan gives it and ties are broken by id as there.
//! When the graph returns fewer rows than asked for (a filter that leaves few of the rows the
//! graph walks through, or no free search context) the caller falls back to the exact scan:
//! an answer never lacks live documents the filter allows because of the graph.
//!
//! **The graph file** (`vectors.graph` beside `vectors.bin`, [`FILE_NAME`]): building takes
//! 23 s of one core at 100,000 rows (both cores halve it), loading the saved graph 0.4 s, so
//! the graph is saved after every build and a restarting server loads it. One line of JSON
//! first: the sha256 of the vectors it was built from ([`vectors_sha256`]: dimension, rows and
//! every float), the settings, and the sha256 of usearch's serialisation, which follows.
//! Written atomically (`crate::durable`, as `super::store` writes the vectors). A file of other
//! vectors (the embedding job changed some), of other settings, or damaged (checksum, sizes)
//! is refused with its path named, rebuilt and saved again; the checksum is verified before
//! usearch parses a byte, since usearch trusts the sizes in its file. Loaded into memory
//! (`load_from_buffer`) rather than memory-mapped (`view`): a mapped graph is read-only, and
//! its file must never change under it.
//!
//! The graph file does not ship with index generations (`crate::cluster::generation` ships
//! `vectors.bin`): it is derived from the vectors, which ship and are checked; the
//! publisher's graph may not be built yet when it publishes (it is built after the vectors
//! are installed); and it is larger than the vectors (181 MB against 156 MB at 100,000 rows
//! of 384 dimensions), a new blob whenever a vector changes. A follower builds its own from
//! the vectors it installs, once, and saves it, so its restarts load it.
//!
//! The graph is rebuilt, not updated in place, when the embedding job changes some rows: rows
//! are in id order, so an added or removed document renumbers every row after it, and the
//! keys of the graph would have to follow (usearch's `rename`, one by one).

use std::io::Write;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{by_score, dot, DenseError, Vectors};

/// The fewest floats the exact scan would read (rows a query may return × dimension) for the
/// graph to be searched instead: 50,000 rows of 384 dimensions (see the module doc).
pub const MIN_FLOATS: usize = 50_000 * 384;

/// The fewest rows a query may return for the graph to answer, for vectors of `dim` floats.
pub fn min_rows(dim: usize) -> usize {
    MIN_FLOATS.div_ceil(dim.max(1))
}

/// Links per node of the graph.
const CONNECTIVITY: usize = 32;
/// Candidates kept while adding a row.
const EXPANSION_ADD: usize = 256;

/// The candidates a search of a graph over `rows` rows keeps (at least the results asked
/// for): 2,048 at 100,000 rows, growing with the square root of the rows (see the module doc),
/// never fewer than 1,024.
pub fn expansion_search(rows: usize) -> usize {
    let scaled = 2_048.0 * (rows as f64 / 100_000.0).sqrt();
    (scaled.ceil() as usize).max(1_024)
}

/// The most results (`skip + limit`) asked of the graph; deeper pages use the exact scan.
pub const MAX_WANT: usize = 1_000;

/// The graph file's name in a data directory, beside the vectors (`super::store::FILE_NAME`).
pub const FILE_NAME: &str = "vectors.graph";
const FORMAT: &str = "rankd-graph";
const VERSION: u32 = 1;

/// The graph file of the data directory `data_dir`.
pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE_NAME)
}

/// Searches the graph can serve at once (each needs one of usearch's per-thread contexts): the
/// search pool admits `8 × cores` (at least 16, `crate::api`), plus the command line's.
fn contexts() -> usize {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    (16 * cores).max(32)
}

/// What the first line of the graph file says: which vectors and settings the graph that
/// follows (usearch's own serialisation) was built from, and that graph's sha256.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    /// [`vectors_sha256`] of the vectors the graph was built over.
    vectors_sha256: String,
    rows: usize,
    dim: usize,
    connectivity: usize,
    expansion_add: usize,
    /// The sha256 of the bytes after the header line.
    graph_sha256: String,
}

/// The sha256 of `vectors` as the graph sees them: dimension, row count and every float (the
/// graph's keys are row numbers, so ids and text hashes do not change it).
pub fn vectors_sha256(vectors: &Vectors) -> String {
    let mut hasher = Sha256::new();
    hasher.update((vectors.dim as u64).to_le_bytes());
    hasher.update((vectors.len() as u64).to_le_bytes());
    let mut bytes = Vec::with_capacity(4 * 16_384);
    for chunk in vectors.data.chunks(16_384) {
        bytes.clear();
        bytes.extend(chunk.iter().flat_map(|x| x.to_le_bytes()));
        hasher.update(&bytes);
    }
    format!("{:x}", hasher.finalize())
}

/// Where a graph came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Built,
    /// Read from the graph file.
    Loaded,
}

/// An HNSW graph over every row of a set of vectors.
pub struct Ann {
    index: usearch::Index,
    origin: Origin,
}

/// usearch's index for `vectors` with rankd's settings, empty.
fn empty(vectors: &Vectors) -> Result<usearch::Index, String> {
    let options = usearch::IndexOptions {
        dimensions: vectors.dim,
        // Inner product on unit vectors: the dot product the exact scan ranks by.
        metric: usearch::MetricKind::IP,
        quantization: usearch::ScalarKind::F32,
        // Twice usearch's defaults (16 links, 128 candidates when adding); the candidates
        // when searching grow with the rows (see the module doc).
        connectivity: CONNECTIVITY,
        expansion_add: EXPANSION_ADD,
        expansion_search: expansion_search(vectors.len()),
        multi: false,
    };
    usearch::Index::new(&options).map_err(|e| e.to_string())
}

impl Ann {
    /// The graph over every row of `vectors` (rayon's threads add rows in parallel).
    pub fn build(vectors: &Vectors) -> Result<Ann, DenseError> {
        let fail = |message: String| DenseError::Ann {
            rows: vectors.len(),
            message,
        };
        let index = empty(vectors).map_err(fail)?;
        let threads = contexts().max(rayon::current_num_threads());
        index
            .reserve_capacity_and_threads(vectors.len(), threads)
            .map_err(|e| fail(e.to_string()))?;
        (0..vectors.len())
            .into_par_iter()
            .try_for_each(|row| index.add(row as u64, vectors.row(row)))
            .map_err(|e| fail(e.to_string()))?;
        Ok(Ann {
            index,
            origin: Origin::Built,
        })
    }

    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// usearch's serialisation of the graph (two equal graphs give equal bytes).
    #[cfg(test)]
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = vec![0u8; self.index.serialized_length()];
        self.index.save_to_buffer(&mut bytes).expect("a graph");
        bytes
    }

    /// Writes the graph to `path` atomically (as `super::store` writes the vectors), tied to
    /// the vectors whose [`vectors_sha256`] is `vectors_sha256`.
    pub fn save(
        &self,
        path: &Path,
        vectors: &Vectors,
        vectors_sha256: &str,
    ) -> Result<(), DenseError> {
        let io = |message: String| DenseError::Io {
            path: path.to_path_buf(),
            message,
        };
        let mut graph = vec![0u8; self.index.serialized_length()];
        self.index
            .save_to_buffer(&mut graph)
            .map_err(|e| io(e.to_string()))?;
        let header = Header {
            format: FORMAT.to_owned(),
            version: VERSION,
            vectors_sha256: vectors_sha256.to_owned(),
            rows: vectors.len(),
            dim: vectors.dim,
            connectivity: CONNECTIVITY,
            expansion_add: EXPANSION_ADD,
            graph_sha256: format!("{:x}", Sha256::digest(&graph)),
        };
        crate::durable::write_atomic_with(path, |f| {
            serde_json::to_writer(&mut *f, &header)?;
            f.write_all(b"\n")?;
            f.write_all(&graph)
        })
        .map_err(|e| io(format!("{e:#}")))
    }

    /// The graph saved at `path` for `vectors` (whose [`vectors_sha256`] is `vectors_sha256`);
    /// `Ok(None)` when there is no file. A file of other vectors or settings, or one whose
    /// checksum fails, is refused (`DenseError::Corrupt` naming the path) before usearch
    /// reads a byte of it: usearch trusts its file's sizes.
    pub fn load(
        path: &Path,
        vectors: &Vectors,
        vectors_sha256: &str,
    ) -> Result<Option<Ann>, DenseError> {
        let corrupt = |message: String| DenseError::Corrupt {
            path: path.to_path_buf(),
            message,
        };
        let Some(bytes) = super::store::read_optional(path)? else {
            return Ok(None);
        };
        let newline = bytes
            .iter()
            .take(4096)
            .position(|&b| b == b'\n')
            .ok_or_else(|| corrupt("no header line".into()))?;
        let header: Header = serde_json::from_slice(&bytes[..newline])
            .map_err(|e| corrupt(format!("header: {e}")))?;
        if header.format != FORMAT || header.version != VERSION {
            return Err(corrupt(format!("not a {FORMAT} file of version {VERSION}")));
        }
        if header.vectors_sha256 != vectors_sha256
            || header.rows != vectors.len()
            || header.dim != vectors.dim
        {
            return Err(corrupt(
                "built from other vectors than the ones served".into(),
            ));
        }
        if (header.connectivity, header.expansion_add) != (CONNECTIVITY, EXPANSION_ADD) {
            return Err(corrupt(format!(
                "built with {} links and {} candidates, this rankd builds with {CONNECTIVITY} \
                 and {EXPANSION_ADD}",
                header.connectivity, header.expansion_add
            )));
        }
        let graph = &bytes[newline + 1..];
        if format!("{:x}", Sha256::digest(graph)) != header.graph_sha256 {
            return Err(corrupt("checksum mismatch: the file is damaged".into()));
        }
        let index = empty(vectors).map_err(corrupt)?;
        index
            .load_from_buffer(graph)
            .map_err(|e| corrupt(e.to_string()))?;
        if index.size() != vectors.len() || index.dimensions() != vectors.dim {
            return Err(corrupt(format!(
                "the graph holds {} rows of {} dimensions",
                index.size(),
                index.dimensions()
            )));
        }
        index.change_expansion_search(expansion_search(vectors.len()));
        let threads = contexts().max(rayon::current_num_threads());
        index
            .reserve_capacity_and_threads(vectors.len(), threads)
            .map_err(|e| corrupt(e.to_string()))?;
        Ok(Some(Ann {
            index,
            origin: Origin::Loaded,
        }))
    }

    /// The `want` rows nearest to `query` among those `allowed` as the graph finds them, best
    /// first with their dot products (ties by row); fewer when the graph finds fewer or cannot
    /// search now.
    pub fn search(
        &self,
        vectors: &Vectors,
        query: &[f32],
        want: usize,
        allowed: impl Fn(usize) -> bool,
    ) -> Vec<(f32, u32)> {
        let found = self
            .index
            .filtered_search(query, want, |key| allowed(key as usize));
        let Ok(found) = found else {
            return Vec::new();
        };
        let mut top: Vec<(f32, u32)> = found
            .keys
            .into_iter()
            .map(|key| (dot(query, vectors.row(key as usize)), key as u32))
            .collect();
        top.sort_unstable_by(by_score);
        top
    }
}
