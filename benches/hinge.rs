//! Structured hinge loss-augmented inference (seed 001, SPEC §3.4): per-call time of the
//! quicksort algorithm vs the O(N log N + N·P) greedy baseline, for AP and NDCG. Results:
//! docs/BENCHMARKS.md, "Structured hinge inference (seed 001)". Run with short windows so
//! the shared machine stays usable:
//!
//! `cargo bench --bench hinge -- --warm-up-time 1 --measurement-time 3`
//!
//! Group `hinge/{ap,ndcg}/{quicksort,greedy}/P{p}_N{n}`: one whole call (split, inference,
//! loss and gradient) with a reused scratch, as the trainer makes it. Scores are uniform in
//! (0, 1) with the positives shifted up by 0.2, a partly trained model.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rankd::rerank::hinge::{HingeScratch, Inference, RankLoss};

/// The paper's headline size (P = 50, N = 5000) and a reranking window's (P = 10, N = 500).
const SIZES: [(usize, usize); 2] = [(10, 500), (50, 5000)];

fn query(num_pos: usize, num_neg: usize) -> (Vec<f32>, Vec<bool>) {
    let mut rng = ChaCha8Rng::seed_from_u64((num_pos * 7919 + num_neg) as u64);
    let n = num_pos + num_neg;
    // Positives spread evenly through the list, as documents arrive from a first phase.
    let stride = n / num_pos;
    let relevant: Vec<bool> = (0..n)
        .map(|i| i % stride == 0 && i / stride < num_pos)
        .collect();
    let scores = relevant
        .iter()
        .map(|&r| rng.random_range(0.0..1.0) + if r { 0.2 } else { 0.0 })
        .collect();
    (scores, relevant)
}

fn inference(c: &mut Criterion) {
    let mut group = c.benchmark_group("hinge");
    for (num_pos, num_neg) in SIZES {
        let (scores, relevant) = query(num_pos, num_neg);
        assert_eq!(relevant.iter().filter(|&&r| r).count(), num_pos);
        let mut grad = vec![0.0; scores.len()];
        for loss in [RankLoss::Ap, RankLoss::Ndcg] {
            for algo in [Inference::Quicksort, Inference::Greedy] {
                let name = format!("{loss:?}/{algo:?}").to_lowercase();
                let id = BenchmarkId::new(name, format!("P{num_pos}_N{num_neg}"));
                let mut scratch = HingeScratch::new();
                group.bench_function(id, |b| {
                    b.iter(|| {
                        scratch
                            .hinge(loss, algo, black_box(&scores), &relevant, &mut grad)
                            .expect("valid query")
                    })
                });
            }
        }
    }
    group.finish();
}

criterion_group!(benches, inference);
criterion_main!(benches);
