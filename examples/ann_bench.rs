//! Nearest neighbours (docs/BENCHMARKS.md, "Nearest neighbours (issue 33)"): the exact scan
//! (`rankd::dense::scan`, what `DenseIndex::nearest` runs below its threshold) against three
//! approximate index crates, usearch, hnsw_rs and hannoy, on the same vectors and query vectors
//! in the same run, one thread.
//!
//! ```text
//! cargo run --release --features ann-bench --example ann_bench -- \
//!     VECTORS.bin MODEL_DIR QUERY_FILE... [--scale N] [--runs 3] \
//!     [--engines exact,usearch,hnsw_rs,hannoy] [--query-cache FILE] \
//!     [--m LINKS] [--ef-add CANDIDATES] [--ef CANDIDATES] [--doc-queries N]
//! ```
//! VECTORS.bin is a data directory's `vectors.bin`; the query files are lines of text, or
//! `id<TAB>text` lines (`.topics`), embedded with the model in MODEL_DIR (cached in
//! `--query-cache` when given, as the embedding costs more than the searches). `--scale N`
//! takes the first N rows, or grows the collection to N rows with perturbed copies of the real
//! rows (each copy: the row plus uniform noise of norm about 0.6, normalised: a cosine of about
//! 0.85 with its source). `--m`, `--ef-add` and `--ef` set the graphs' links per node and
//! candidates when adding and searching (default 16, 128, 64; `--ef` may be a list, `1024,2048`,
//! each measured on the same graph, and `rankd` is rankd's rule for the rows measured); `--doc-queries N` searches for N documents' own vectors
//! instead of the queries. `--graph-cache FILE`: usearch's graph is loaded from FILE when it
//! exists (its "build s" is then the load time) and saved there after a build, so that a sweep
//! of `--ef` over several runs builds each graph once (the file must come from the same
//! vectors, `--scale`, `--m` and `--ef-add`: nothing checks it).
//!
//! `--restart DIR` measures instead what a restarting server spends on the graph of these
//! (grown) vectors, through rankd's own code and settings (`DenseIndex::build_graph`): the
//! vectors are written to `DIR/vectors.bin`, then read back (timed), and the graph is built and
//! saved to `DIR/vectors.graph` when there is none there (timed), then loaded from it (timed).
//!
//! For each engine: the build time of the index over every row (one thread), its memory (the
//! process's resident set before and after) and disk size, then for k = 10 and k = 100 the
//! query time of each query, `--runs` times; p50 and p99 of each run, the median of the runs.
//! Recall@k is the share of the exact scan's top k each engine returns (rows of equal score count
//! alike, see `recall`; "by row" counts only the exact scan's own rows); "filtered" is the same
//! with only every tenth row allowed (a language a tenth of the collection is in). Prints one
//! markdown table row per engine and measure.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

use rankd::dense::{self, store, Vectors};

/// The candidates a graph search keeps (`--ef`; 0: 64, usearch's default), at least k.
static EF: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// `--ef rankd`: rankd's own candidates for the rows measured (`dense::ann::expansion_search`).
const RANKD_EF: usize = usize::MAX;
/// Links per node (`--m`; 0: 16, usearch's default) and candidates when adding (`--ef-add`; 0:
/// 128, usearch's default).
static M: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static EF_ADD: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn m() -> usize {
    let m = M.load(std::sync::atomic::Ordering::Relaxed);
    if m == 0 {
        16
    } else {
        m
    }
}

fn ef_add() -> usize {
    let ef = EF_ADD.load(std::sync::atomic::Ordering::Relaxed);
    if ef == 0 {
        128
    } else {
        ef
    }
}

fn ef(k: usize) -> usize {
    let ef = EF.load(std::sync::atomic::Ordering::Relaxed);
    k.max(if ef == 0 { 64 } else { ef })
}

/// The rows a filtered query may return: every tenth.
fn allowed(row: usize) -> bool {
    row.is_multiple_of(10)
}

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The query vectors: embedded, or read from `cache` (little-endian f32 rows).
fn queries(model: &Path, files: &[PathBuf], cache: Option<&Path>, dim: usize) -> Vec<Vec<f32>> {
    if let Some(bytes) = cache.and_then(|c| std::fs::read(c).ok()) {
        let floats: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        return floats.chunks_exact(dim).map(<[f32]>::to_vec).collect();
    }
    let embedder = rankd::embed::AnyEmbedder::load(model).expect("the embedder");
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).expect("a query file");
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let query = line.split_once('\t').map_or(line, |(_, q)| q);
            out.push(embedder.embed(query).expect("an embedding"));
        }
    }
    if let Some(cache) = cache {
        let bytes: Vec<u8> = out.iter().flatten().flat_map(|x| x.to_le_bytes()).collect();
        std::fs::write(cache, bytes).expect("the query cache");
    }
    out
}

/// `v` grown to `n` rows with perturbed copies (see the module doc).
fn grow(v: Vectors, n: usize) -> Vectors {
    use rand::{Rng, SeedableRng};
    if n == 0 || n == v.len() {
        return v;
    }
    if n < v.len() {
        return Vectors {
            ids: v.ids[..n].to_vec(),
            text_hashes: v.text_hashes[..n].to_vec(),
            data: v.data[..n * v.dim].to_vec(),
            ..v
        };
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(33);
    let (dim, real) = (v.dim, v.len());
    let mut data = v.data;
    data.reserve((n - real) * dim);
    for i in real..n {
        let source = i % real;
        let mut row: Vec<f32> = (0..dim)
            .map(|d| data[source * dim + d] + (rng.random::<f32>() - 0.5) * 0.106)
            .collect();
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        row.iter_mut().for_each(|x| *x /= norm);
        data.extend(row);
    }
    Vectors {
        ids: (0..n).map(|i| format!("{i:09}")).collect(),
        text_hashes: vec![0; n],
        data,
        ..v
    }
}

/// An index under test: answers a query's `k` nearest rows, optionally among `allowed` only.
trait Engine {
    fn top(&self, query: &[f32], k: usize, filtered: bool) -> Vec<u64>;
    /// Takes the current `--ef` (graphs that keep it in the index).
    fn set_ef(&self) {}
    fn disk_bytes(&self) -> u64;
    fn deletes(&self) -> &'static str;
}

struct Exact<'a>(&'a Vectors);

impl Engine for Exact<'_> {
    fn top(&self, query: &[f32], k: usize, filtered: bool) -> Vec<u64> {
        let (top, _) = dense::scan(self.0, query, k, |row| !filtered || allowed(row));
        top.into_iter().map(|(_, row)| u64::from(row)).collect()
    }
    fn disk_bytes(&self) -> u64 {
        0
    }
    fn deletes(&self) -> &'static str {
        "rows without a live address are skipped"
    }
}

struct Usearch(usearch::Index);

impl Usearch {
    fn build(v: &Vectors, cache: Option<&Path>) -> Usearch {
        let options = usearch::IndexOptions {
            dimensions: v.dim,
            metric: usearch::MetricKind::IP,
            quantization: usearch::ScalarKind::F32,
            connectivity: m(),
            expansion_add: ef_add(),
            expansion_search: 0,
            multi: false,
        };
        let index = usearch::Index::new(&options).expect("a usearch index");
        let cached = cache.filter(|c| c.exists());
        if let Some(cache) = cached {
            index
                .load(cache.to_str().expect("a UTF-8 path"))
                .expect("usearch load");
            assert_eq!(index.size(), v.len(), "{}: another graph", cache.display());
        } else {
            index.reserve(v.len()).expect("usearch reserve");
            for row in 0..v.len() {
                index.add(row as u64, v.row(row)).expect("usearch add");
            }
            if let Some(cache) = cache {
                index
                    .save(cache.to_str().expect("a UTF-8 path"))
                    .expect("usearch save");
            }
        }
        index.change_expansion_search(ef(0));
        Usearch(index)
    }
}

impl Engine for Usearch {
    fn set_ef(&self) {
        self.0.change_expansion_search(ef(0));
    }
    fn top(&self, query: &[f32], k: usize, filtered: bool) -> Vec<u64> {
        let found = if filtered {
            self.0
                .filtered_search(query, k, |key| allowed(key as usize))
        } else {
            self.0.search(query, k)
        };
        found.expect("usearch search").keys
    }
    fn disk_bytes(&self) -> u64 {
        self.0.serialized_length() as u64
    }
    fn deletes(&self) -> &'static str {
        "remove(key) marks a tombstone; filtered_search(predicate)"
    }
}

struct HnswRs(hnsw_rs::hnsw::Hnsw<'static, f32, hnsw_rs::anndists::dist::DistDot>);

impl HnswRs {
    fn build(v: &Vectors) -> HnswRs {
        let index =
            hnsw_rs::hnsw::Hnsw::new(m(), v.len(), 16, ef_add(), hnsw_rs::anndists::dist::DistDot);
        for row in 0..v.len() {
            index.insert_slice((v.row(row), row));
        }
        HnswRs(index)
    }
}

impl Engine for HnswRs {
    fn top(&self, query: &[f32], k: usize, filtered: bool) -> Vec<u64> {
        let ef = ef(k);
        let found = if filtered {
            let filter = |id: &usize| allowed(*id);
            self.0.search_filter(query, k, ef, Some(&filter))
        } else {
            self.0.search(query, k, ef)
        };
        found.into_iter().map(|n| n.d_id as u64).collect()
    }
    fn disk_bytes(&self) -> u64 {
        0
    }
    fn deletes(&self) -> &'static str {
        "no delete: search_filter(predicate) only"
    }
}

struct Hannoy {
    /// Leaked: the database borrows the environment (one per run of the benchmark).
    env: &'static heed::Env,
    db: hannoy::Database<'static, hannoy::distances::Cosine>,
    _dir: tempfile::TempDir,
}

impl Hannoy {
    fn build(v: &Vectors) -> Hannoy {
        use rand_010::SeedableRng;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let env = unsafe {
            heed::EnvOpenOptions::new()
                .map_size(16 << 30)
                .open(dir.path())
        }
        .expect("an LMDB environment");
        let env: &'static heed::Env = Box::leak(Box::new(env));
        let wtxn = env.write_txn().expect("a write transaction");
        let db: hannoy::Database<hannoy::distances::Cosine> = env
            .create_databases_and_commit(wtxn, |dbo, wtxn| -> heed::Result<_> {
                dbo.create_database(wtxn, None)
                    .map(heed::CommitOrAbort::<_, ()>::Commit)
            })
            .expect("a database")
            .unwrap_commit();
        let mut wtxn = env.write_txn().expect("a write transaction");
        let writer = hannoy::Writer::new(db, 0, v.dim);
        for row in 0..v.len() {
            writer
                .add_item(&mut wtxn, row as u32, v.row(row))
                .expect("hannoy add");
        }
        let mut rng = rand_010::rngs::StdRng::seed_from_u64(33);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("a thread pool");
        pool.install(|| {
            writer
                .builder(&mut rng)
                .ef_construction(ef_add())
                .build::<16, 32>(&mut wtxn)
        })
        .expect("hannoy build");
        wtxn.commit().expect("a commit");
        Hannoy { env, db, _dir: dir }
    }
}

impl Engine for Hannoy {
    fn top(&self, query: &[f32], k: usize, filtered: bool) -> Vec<u64> {
        let rtxn = self.env.read_txn().expect("a read transaction");
        let reader = hannoy::Reader::open(&rtxn, 0, self.db).expect("a reader");
        let mut nns = reader.nns(k);
        nns.ef_search(ef(k));
        let candidates: roaring::RoaringBitmap;
        if filtered {
            candidates = reader
                .item_ids()
                .iter()
                .filter(|&r| allowed(r as usize))
                .collect();
            nns.candidates(&candidates);
        }
        let found = nns.by_vector(&rtxn, query).expect("hannoy search");
        found
            .into_nns()
            .into_iter()
            .map(|(id, _)| u64::from(id))
            .collect()
    }
    fn disk_bytes(&self) -> u64 {
        self.env.real_disk_size().unwrap_or(0)
    }
    fn deletes(&self) -> &'static str {
        "del_item then an incremental build; candidates(RoaringBitmap)"
    }
}

/// The share of the exact top k found, documents with the same score being interchangeable:
/// a row counts when its dot product reaches the exact k-th's (the demo has many pages with the
/// same title and first passage, hence the same vector, and which of them a graph returns is
/// arbitrary). `by_row` counts only the very rows of the exact scan.
fn recall(v: &Vectors, query: &[f32], found: &[u64], truth: &[u64], by_row: bool) -> f64 {
    let Some(&last) = truth.last() else {
        return 1.0;
    };
    let kth = dense::dot(query, v.row(last as usize));
    let hits = found
        .iter()
        .filter(|&&r| {
            truth.contains(&r) || (!by_row && dense::dot(query, v.row(r as usize)) >= kth - 1e-6)
        })
        .count();
    hits.min(truth.len()) as f64 / truth.len() as f64
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut positional = Vec::new();
    let (mut scale, mut runs) = (0usize, 3usize);
    let mut engines = "exact,usearch,hnsw_rs,hannoy".to_owned();
    let mut cache = None;
    let mut efs = vec![0usize];
    let mut graph_cache = None;
    let mut restart = None;
    let mut doc_queries = 0usize;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--scale" => scale = args.next().expect("--scale N").parse()?,
            "--runs" => runs = args.next().expect("--runs N").parse()?,
            "--engines" => engines = args.next().expect("--engines LIST"),
            "--m" => M.store(args.next().expect("--m N").parse()?, Ordering::Relaxed),
            "--ef-add" => {
                EF_ADD.store(args.next().expect("--ef-add N").parse()?, Ordering::Relaxed)
            }
            "--ef" => {
                efs = args
                    .next()
                    .expect("--ef N[,N…]")
                    .split(',')
                    .map(|ef| match ef {
                        "rankd" => Ok(RANKD_EF),
                        n => n.parse(),
                    })
                    .collect::<Result<_, _>>()?
            }
            "--graph-cache" => {
                graph_cache = Some(PathBuf::from(args.next().expect("--graph-cache FILE")))
            }
            "--doc-queries" => doc_queries = args.next().expect("--doc-queries N").parse()?,
            "--restart" => restart = Some(PathBuf::from(args.next().expect("--restart DIR"))),
            "--query-cache" => cache = Some(PathBuf::from(args.next().expect("--query-cache F"))),
            _ => positional.push(PathBuf::from(a)),
        }
    }
    let vectors = store::read(&positional[0])?
        .ok_or_else(|| anyhow::anyhow!("{}: no such file", positional[0].display()))?;
    let queries = queries(
        &positional[1],
        &positional[2..],
        cache.as_deref(),
        vectors.dim,
    );
    let vectors = grow(vectors, scale);
    if let Some(dir) = restart {
        return measure_restart(vectors, &dir);
    }
    // In-distribution queries instead: every (n / N)-th document's own vector.
    let queries = match vectors.len().checked_div(doc_queries) {
        Some(step) => (0..doc_queries)
            .map(|i| vectors.row((i * step.max(1)) % vectors.len()).to_vec())
            .collect(),
        None => queries,
    };
    let n = vectors.len();
    for ef in efs.iter_mut().filter(|ef| **ef == RANKD_EF) {
        *ef = dense::ann::expansion_search(n);
    }
    eprintln!("{n} rows × {}, {} queries", vectors.dim, queries.len());

    let exact = Exact(&vectors);
    let truth = |k: usize, filtered: bool| -> Vec<Vec<u64>> {
        queries.iter().map(|q| exact.top(q, k, filtered)).collect()
    };
    let truths = [(10, truth(10, false)), (100, truth(100, false))];
    let filtered_truth = truth(10, true);

    println!(
        "| rows | engine | build s | memory MB | disk MB | k | p50 ms | p99 ms | recall@k | \
         recall@k by row | filtered recall@10 | deletes, filter |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for name in engines.split(',') {
        let before = resident_bytes();
        let start = Instant::now();
        let engine: Box<dyn Engine + '_> = match name {
            "exact" => Box::new(Exact(&vectors)),
            "usearch" => Box::new(Usearch::build(&vectors, graph_cache.as_deref())),
            "hnsw_rs" => Box::new(HnswRs::build(&vectors)),
            "hannoy" => Box::new(Hannoy::build(&vectors)),
            other => anyhow::bail!("unknown engine {other}"),
        };
        let build = start.elapsed().as_secs_f64();
        let memory = resident_bytes().saturating_sub(before) as f64 / 1e6;
        // The exact scan once; each graph once per `--ef`.
        let sweep = if name == "exact" { &efs[..1] } else { &efs[..] };
        for &ef in sweep {
            EF.store(ef, Ordering::Relaxed);
            engine.set_ef();
            let label = if name == "exact" || efs.len() == 1 {
                name.to_owned()
            } else {
                format!("{name} ef={}", self::ef(0))
            };
            let filtered: f64 = queries
                .iter()
                .zip(&filtered_truth)
                .map(|(q, t)| recall(&vectors, q, &engine.top(q, 10, true), t, false))
                .sum::<f64>()
                / queries.len() as f64;
            for (k, truth) in &truths {
                let (mut p50s, mut p99s) = (Vec::new(), Vec::new());
                let (mut hits, mut row_hits) = (0.0, 0.0);
                for _ in 0..runs {
                    let mut times = Vec::with_capacity(queries.len());
                    (hits, row_hits) = (0.0, 0.0);
                    for (q, t) in queries.iter().zip(truth) {
                        let start = Instant::now();
                        let found = std::hint::black_box(engine.top(q, *k, false));
                        times.push(start.elapsed().as_secs_f64() * 1e3);
                        hits += recall(&vectors, q, &found, t, false);
                        row_hits += recall(&vectors, q, &found, t, true);
                    }
                    times.sort_by(f64::total_cmp);
                    p50s.push(percentile(&times, 0.5));
                    p99s.push(percentile(&times, 0.99));
                }
                println!(
                "| {n} | {label} | {build:.2} | {memory:.0} | {:.0} | {k} | {:.3} | {:.3} | {:.4} | \
                 {:.4} | {filtered:.4} | {} |",
                engine.disk_bytes() as f64 / 1e6,
                median(p50s),
                median(p99s),
                hits / queries.len() as f64,
                row_hits / queries.len() as f64,
                engine.deletes()
            );
            }
        }
    }
    Ok(())
}

/// `--restart DIR` (see the module doc): one markdown table row per step.
fn measure_restart(vectors: Vectors, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let path = store::path(dir);
    store::write(&path, &vectors)?;
    drop(vectors);
    // The first pass builds (and saves), the second loads.
    let _ = std::fs::remove_file(dense::ann::path(dir));
    println!("| rows | step | s | graph |");
    println!("|---|---|---|---|");
    let threads = rayon::current_num_threads();
    for _ in 0..2 {
        let start = Instant::now();
        let vectors = store::read(&path)?.expect("the vectors just written");
        let read = start.elapsed().as_secs_f64();
        let n = vectors.len();
        println!("| {n} | read vectors.bin | {read:.2} | |");
        let index =
            dense::DenseIndex::without_graph(vectors).with_graph_file(dense::ann::path(dir));
        let start = Instant::now();
        index.build_graph();
        let graph = start.elapsed().as_secs_f64();
        println!(
            "| {n} | graph ({threads} threads) | {graph:.2} | {:?} |",
            index.graph_origin()
        );
    }
    Ok(())
}
