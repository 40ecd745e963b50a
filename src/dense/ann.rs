//! The approximate nearest-neighbour index over the document vectors: usearch's HNSW graph
//! (Unum's single-header C++ library through its own `cxx` binding), built over every row
//! when vectors are installed (`super::DenseIndex::build_graph`, from [`MIN_ROWS`] rows: the
//! embedding job serves new vectors by the exact scan while it builds), searched by
//! `super::DenseIndex::nearest` when the documents a query may return are at least
//! [`MIN_ROWS`]; below that the exact scan answers.
//!
//! Why usearch, and these settings (`examples/ann_bench.rs`, docs/BENCHMARKS.md "Nearest
//! neighbours (issue 33)": the demo's 32,900 × 384 MiniLM vectors and 798 real queries, one
//! thread, same run): with each crate's usual settings (16 links, 128 candidates when adding,
//! 64 when searching) usearch answered in 0.13 ms (p50, k = 10) against hnsw_rs 0.23 ms,
//! hannoy 0.40 ms and the exact scan 2.08 ms; it was built in 6.6 s, hnsw_rs in 4.4 s and
//! hannoy in 25 s (3.1, 5.5 and 16.8 s in a quieter run); and it has deletes (tombstones),
//! filtered search, save and a memory-mapped view, where hnsw_rs cannot delete and hannoy
//! rebuilds through LMDB. But all three found only 0.70–0.73 of the
//! exact top 10 for these queries (0.99 for the documents' own vectors as queries): short
//! queries sit far from every document, where a graph walk stops early. Recall@10 ≥ 0.98 took
//! 32 links, 256 candidates when adding and 1,024 when searching (0.981 on the demo, 1.55 ms
//! against the exact scan's 2.07 ms, built in 5.4 s), which saves little at the demo's size
//! and most of the scan from about 50,000 rows, hence [`MIN_ROWS`] (100,000 rows, the demo's
//! and two perturbed copies of each: 3.7 ms against 17.9 ms on a loaded machine, recall@10
//! 0.972).
//!
//! The graph's keys are row numbers. A search is filtered by the rows the caller allows (live
//! documents, in the query's language), and its hits are scored again with `super::dot`, so a
//! document's score is the one the exact scan gives it and ties are broken by id as there.
//! When the graph returns fewer rows than asked for (a filter that leaves few of the rows the
//! graph walks through, or no free search context) the caller falls back to the exact scan:
//! an answer never lacks live documents the filter allows because of the graph. The graph is
//! rebuilt when the vectors change and kept when a run of the embedding job leaves them equal;
//! it is not persisted yet (one thread built 100,000 rows in 49–87 s, rayon's threads share the
//! work; a starting server searches by the exact scan until then).

use rayon::prelude::*;

use super::{by_score, dot, DenseError, Vectors};

/// The fewest rows a query may return for the graph to be searched instead of the exact scan.
pub const MIN_ROWS: usize = 50_000;

/// Links per node of the graph.
const CONNECTIVITY: usize = 32;
/// Candidates kept while adding a row.
const EXPANSION_ADD: usize = 256;
/// Candidates kept while searching (at least the results asked for).
const EXPANSION_SEARCH: usize = 1_024;

/// The most results (`skip + limit`) asked of the graph; deeper pages use the exact scan.
pub const MAX_WANT: usize = 1_000;

/// Searches the graph can serve at once (each needs one of usearch's per-thread contexts): the
/// search pool admits `8 × cores` (at least 16, `crate::api`), plus the command line's.
fn contexts() -> usize {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    (16 * cores).max(32)
}

/// An HNSW graph over every row of a set of vectors.
pub struct Ann {
    index: usearch::Index,
}

impl Ann {
    /// The graph over every row of `vectors` (rayon's threads add rows in parallel).
    pub fn build(vectors: &Vectors) -> Result<Ann, DenseError> {
        let fail = |e: &dyn std::fmt::Display| DenseError::Ann {
            rows: vectors.len(),
            message: e.to_string(),
        };
        let options = usearch::IndexOptions {
            dimensions: vectors.dim,
            // Inner product on unit vectors: the dot product the exact scan ranks by.
            metric: usearch::MetricKind::IP,
            quantization: usearch::ScalarKind::F32,
            // Twice usearch's defaults (16 links, 128 candidates when adding) and sixteen times
            // its 64 candidates when searching: with the defaults, the demo's queries found
            // 0.71 of the exact top 10 (see the module doc).
            connectivity: CONNECTIVITY,
            expansion_add: EXPANSION_ADD,
            expansion_search: EXPANSION_SEARCH,
            multi: false,
        };
        let index = usearch::Index::new(&options).map_err(|e| fail(&e))?;
        let threads = contexts().max(rayon::current_num_threads());
        index
            .reserve_capacity_and_threads(vectors.len(), threads)
            .map_err(|e| fail(&e))?;
        (0..vectors.len())
            .into_par_iter()
            .try_for_each(|row| index.add(row as u64, vectors.row(row)))
            .map_err(|e| fail(&e))?;
        Ok(Ann { index })
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
