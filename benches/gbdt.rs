//! Scoring speed of the compiled tree ensemble (issue 15; `src/rerank/gbdt/compiled.rs`).
//! Results: docs/BENCHMARKS.md (to be recorded by the lead) and notes-gbdt.md. Run with
//! short windows so the shared machine stays usable:
//!
//! `cargo bench --bench gbdt -- --warm-up-time 1 --measurement-time 3`
//!
//! Groups:
//! - `gbdt_score/lightgbm_1000x64/100`: the LightGBM model that `bench/gbdt_predict.py`
//!   trains and times (1000 trees of 64 leaves on the LightGBM LETOR example), imported with
//!   rankd's LightGBM importer, scoring the same 100 rows of `rank.test` on one thread. Run
//!   the script first; the group is skipped (with a note) when its files are missing.
//! - `gbdt_score/lightgbm_1000trees_u16bins/100`: the same with `u16` bins
//!   (`BinWidth::U16`, the layout before 2026-11-26), for comparison in one run.
//! - `gbdt_score/synthetic_1000x64/{rows}`: a seeded random forest of the same shape (trees
//!   grown by splitting random leaves, 300 features, thresholds on a 255-value grid), for
//!   machines without Python.
//! - `gbdt_compile`: compiling the model (once per load).
//!
//! `GBDT_ALTERNATE=2000 cargo bench --bench gbdt` times the LightGBM model's two bin widths
//! alternately instead (percentiles, for a noisy shared machine).

use std::hint::black_box;
use std::path::Path;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rankd::rerank::gbdt::compiled::BinWidth;
use rankd::rerank::gbdt::{CompiledForest, Forest, Node, Tree};

const FEATURES: usize = 300;

fn synthetic_tree(rng: &mut ChaCha8Rng, leaves: usize) -> Tree {
    let mut nodes = vec![Node::Leaf {
        value: rng.random_range(-0.1..0.1),
    }];
    let mut open = vec![0usize];
    while open.len() < leaves {
        let i = open.swap_remove(rng.random_range(0..open.len()));
        let (l, r) = (nodes.len() as u32, nodes.len() as u32 + 1);
        for _ in 0..2 {
            nodes.push(Node::Leaf {
                value: rng.random_range(-0.1..0.1),
            });
        }
        nodes[i] = Node::Split {
            feature: rng.random_range(0..FEATURES as u32),
            threshold: rng.random_range(0..255) as f32 / 255.0,
            nan_left: rng.random_bool(0.5),
            zero_missing: false,
            left: l,
            right: r,
        };
        open.push(l as usize);
        open.push(r as usize);
    }
    Tree::new(nodes)
}

fn synthetic() -> (Forest, Vec<f32>) {
    let mut rng = ChaCha8Rng::seed_from_u64(15);
    let trees = (0..1000).map(|_| synthetic_tree(&mut rng, 64)).collect();
    let forest = Forest {
        num_features: FEATURES,
        base_score: 0.0,
        trees,
    };
    // Sparse rows in [0, 1], as LETOR features are (a third non-zero).
    let rows = (0..1000 * FEATURES)
        .map(|_| {
            if rng.random_bool(0.33) {
                rng.random_range(0.0..1.0)
            } else {
                0.0
            }
        })
        .collect();
    (forest, rows)
}

/// The model and rows `bench/gbdt_predict.py` wrote, if it has been run.
fn lightgbm() -> Option<(Forest, Vec<f32>, usize)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/out/gbdt_predict");
    let text = std::fs::read_to_string(dir.join("model.txt")).ok()?;
    let rows_text = std::fs::read_to_string(dir.join("rows.tsv")).ok()?;
    let imported = rankd::rerank::gbdt::import::lightgbm::parse(&text).expect("LightGBM model");
    let forest = imported.forest;
    let mut n = 0;
    let mut rows = Vec::new();
    for line in rows_text.lines().filter(|l| !l.is_empty()) {
        let values: Vec<f32> = line.split('\t').map(|v| v.parse().unwrap()).collect();
        assert_eq!(values.len(), forest.num_features, "rows.tsv width");
        rows.extend(values);
        n += 1;
    }
    Some((forest, rows, n))
}

/// `GBDT_ALTERNATE=ROUNDS`: instead of criterion's groups, the LightGBM model's two bin
/// widths timed alternately, one call each per round, and their 10th percentile and median
/// printed (a shared, noisy machine hits both alike).
fn alternate(rounds: usize) {
    let Some((forest, rows, n)) = lightgbm() else {
        eprintln!("gbdt_alternate: run bench/gbdt_predict.py first");
        return;
    };
    let compiled = CompiledForest::new(&forest).unwrap();
    let mut out = vec![0f64; n];
    let widths = [BinWidth::U16, BinWidth::U8];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); widths.len()];
    for _ in 0..rounds {
        for (w, &width) in widths.iter().enumerate() {
            let t = std::time::Instant::now();
            compiled
                .score_with(width, black_box(&rows), n, &mut out)
                .unwrap();
            black_box(&out);
            times[w].push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    for (w, t) in widths.iter().zip(&mut times) {
        t.sort_by(f64::total_cmp);
        let at = |p: f64| t[((t.len() - 1) as f64 * p).round() as usize];
        println!(
            "gbdt_alternate {w:?}: p10 {:.3} ms, median {:.3} ms, p90 {:.3} ms ({rounds} rounds, {n} rows)",
            at(0.1),
            at(0.5),
            at(0.9)
        );
    }
}

fn bench_score(c: &mut Criterion) {
    if let Ok(rounds) = std::env::var("GBDT_ALTERNATE") {
        alternate(rounds.parse().expect("GBDT_ALTERNATE=ROUNDS"));
        return;
    }
    let mut group = c.benchmark_group("gbdt_score");
    if let Some((forest, rows, n)) = lightgbm() {
        let compiled = CompiledForest::new(&forest).unwrap();
        let mut out = vec![0f64; n];
        group.throughput(Throughput::Elements(n as u64));
        let id = BenchmarkId::new(format!("lightgbm_{}trees", forest.trees.len()), n);
        group.bench_function(id, |b| {
            b.iter(|| {
                compiled.score_into(black_box(&rows), n, &mut out).unwrap();
                black_box(&out);
            })
        });
        // The same with u16 bins (the layout before 2026-11-26, and every forest with a
        // feature of more than 253 thresholds).
        let id = BenchmarkId::new(format!("lightgbm_{}trees_u16bins", forest.trees.len()), n);
        group.bench_function(id, |b| {
            b.iter(|| {
                compiled
                    .score_with(BinWidth::U16, black_box(&rows), n, &mut out)
                    .unwrap();
                black_box(&out);
            })
        });
    } else {
        eprintln!("gbdt_score/lightgbm: run bench/gbdt_predict.py first (skipped)");
    }
    let (forest, rows) = synthetic();
    let compiled = CompiledForest::new(&forest).unwrap();
    for n in [1usize, 10, 100, 1000] {
        let mut out = vec![0f64; n];
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::new("synthetic_1000x64", n), |b| {
            b.iter(|| {
                compiled
                    .score_into(black_box(&rows[..n * FEATURES]), n, &mut out)
                    .unwrap();
                black_box(&out);
            })
        });
    }
    group.finish();
    c.bench_function("gbdt_compile/synthetic_1000x64", |b| {
        b.iter(|| CompiledForest::new(black_box(&forest)).unwrap())
    });
}

criterion_group!(benches, bench_score);
criterion_main!(benches);
