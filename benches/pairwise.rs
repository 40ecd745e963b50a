//! Pairwise core benchmarks (issue 3, SPEC §7). Results: docs/BENCHMARKS.md, "Pairwise core
//! (issue 3)". Run with short windows so the shared machine stays usable:
//!
//! `cargo bench --bench pairwise -- --warm-up-time 1 --measurement-time 3`
//!
//! Groups: `huber_loss_grad/{kernel}/{n⁺}x{n⁻}` (throughput = pairs), `score_block/{isa}/
//! n{n}_d{d}` (throughput = multiply-adds), `crossover/{kernel}/{n⁺}x{n⁻}` (sorted vs the
//! best all-pairs kernel, to place `SORTED_CROSSOVER`). The measured peak FMA
//! throughput is printed before the scoring group and written to
//! `target/criterion/peak_fma_gflops.txt`; the read bound of each block (the fastest its bytes
//! can be streamed from where they live, `measured_read_gbs`) goes to
//! `target/criterion/score_block_read_gbs.json`.

use std::hint::black_box;

use aligned_vec::AVec;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rankd::pairwise::{
    measured_peak_gflops, measured_read_gbs, pair_loss_grad_with, score_block_with, Isa, Kernel,
    Loss,
};

const HUBER: Loss = Loss::Huber { tau: 0.1 };

/// Sigmoid-like scores in (0, 1), as the trainer feeds them (SPEC §3.3), and weights in (0, 1].
fn query(n_pos: usize, n_neg: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut rng = ChaCha8Rng::seed_from_u64((n_pos * 31 + n_neg) as u64);
    let pos = (0..n_pos).map(|_| rng.random_range(0.0..1.0)).collect();
    let neg = (0..n_neg).map(|_| rng.random_range(0.0..1.0)).collect();
    let v = (0..n_pos).map(|_| rng.random_range(0.01..1.0)).collect();
    (pos, neg, v)
}

fn kernels() -> Vec<(String, Kernel)> {
    let mut kernels: Vec<(String, Kernel)> = Isa::available()
        .into_iter()
        .map(|isa| (format!("{isa:?}").to_lowercase(), Kernel::AllPairs(isa)))
        .collect();
    kernels.push(("sorted".into(), Kernel::Sorted));
    kernels
}

fn bench_loss(
    c: &mut Criterion,
    group_name: &str,
    sizes: &[(usize, usize)],
    kernels: &[(String, Kernel)],
) {
    let mut group = c.benchmark_group(group_name);
    for &(n_pos, n_neg) in sizes {
        let (pos, neg, v) = query(n_pos, n_neg);
        let (mut gp, mut gn) = (vec![0.0; n_pos], vec![0.0; n_neg]);
        group.throughput(Throughput::Elements((n_pos * n_neg) as u64));
        for (name, kernel) in kernels {
            let id = BenchmarkId::new(name, format!("{n_pos}x{n_neg}"));
            group.bench_function(id, |b| {
                b.iter(|| {
                    pair_loss_grad_with(*kernel, &pos, &neg, &v, HUBER, &mut gp, &mut gn).unwrap()
                })
            });
        }
    }
    group.finish();
}

fn huber_loss_grad(c: &mut Criterion) {
    bench_loss(
        c,
        "huber_loss_grad",
        &[(10, 90), (100, 900), (1000, 9000)],
        &kernels(),
    );
}

fn crossover(c: &mut Criterion) {
    let best = Kernel::AllPairs(*Isa::available().last().unwrap());
    let kernels = [
        ("allpairs".to_string(), best),
        ("sorted".to_string(), Kernel::Sorted),
    ];
    let mut sizes = Vec::new();
    for n_pos in [16, 32, 64, 96, 128, 192, 256] {
        sizes.push((n_pos, 9 * n_pos));
        sizes.push((n_pos, n_pos));
    }
    bench_loss(c, "crossover", &sizes, &kernels);
}

/// Measured right before the scoring benchmarks, which are reported as a share of it.
fn record_peak() {
    if let Some(peak) = measured_peak_gflops() {
        println!("measured peak f32 FMA throughput (one core): {peak:.1} GFLOP/s");
        let _ = std::fs::create_dir_all("target/criterion");
        let _ = std::fs::write("target/criterion/peak_fma_gflops.txt", format!("{peak}\n"));
    }
}

/// Block shapes: the n = 100 and 1000 (54 KB and more at d = 136: out of the L1 data
/// cache, in L2 or L3), plus n = 24, which fits a 32 KiB L1D at every d.
const BLOCK_ROWS: [usize; 3] = [24, 100, 1000];
const BLOCK_DIMS: [usize; 3] = [32, 136, 300];

fn score_block(c: &mut Criterion) {
    record_peak();
    let mut group = c.benchmark_group("score_block");
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut read_bounds = serde_json::Map::new();
    for n in BLOCK_ROWS {
        for d in BLOCK_DIMS {
            // Cache-line aligned, as the serving path allocates its feature blocks: a 32-byte
            // load that straddles two lines costs two L1 reads.
            let x = AVec::<f32>::from_iter(0, (0..n * d).map(|_| rng.random_range(-1.0..1.0)));
            let w: Vec<f32> = (0..d).map(|_| rng.random_range(-1.0..1.0)).collect();
            let mut out = vec![0.0f32; n];
            if let Some(gbs) = measured_read_gbs(n * d * 4) {
                println!(
                    "read bound n{n}_d{d}: {gbs:.1} GB/s = {:.1} GFLOP/s",
                    gbs / 2.0
                );
                read_bounds.insert(format!("n{n}_d{d}"), gbs.into());
            }
            group.throughput(Throughput::Elements((n * d) as u64));
            for isa in Isa::available() {
                let id = BenchmarkId::new(format!("{isa:?}").to_lowercase(), format!("n{n}_d{d}"));
                group.bench_function(id, |b| {
                    b.iter(|| score_block_with(isa, black_box(&x[..]), n, d, &w, &mut out).unwrap())
                });
            }
        }
    }
    group.finish();
    let _ = std::fs::write(
        "target/criterion/score_block_read_gbs.json",
        serde_json::Value::Object(read_bounds).to_string(),
    );
}

criterion_group!(benches, huber_loss_grad, score_block, crossover);
criterion_main!(benches);
