//! Shared test helpers: random graphs and dense, independent oracles.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::Csr;

/// A directed Erdős–Rényi graph G(n, p), deterministic for a seed.
pub(crate) fn random_graph(seed: u64, n: usize, p: f64) -> Csr {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut edges = Vec::new();
    for s in 0..n as u32 {
        for t in 0..n as u32 {
            if s != t && rng.random::<f64>() < p {
                edges.push((s, t));
            }
        }
    }
    Csr::from_edges(n, &edges).unwrap().0
}

pub(crate) fn assert_close(actual: &[f64], expected: &[f64], tol: f64) {
    assert_eq!(actual.len(), expected.len());
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        assert!((a - e).abs() <= tol, "entry {i}: {a} vs {e} (tol {tol})");
    }
}

/// Solves `A x = b` by Gaussian elimination with partial pivoting (dense, small n).
#[allow(clippy::needless_range_loop)] // textbook index form, easiest to check by eye
pub(crate) fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
    let n = b.len();
    for col in 0..n {
        let pivot = (col..n)
            .max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))
            .unwrap();
        a.swap(col, pivot);
        b.swap(col, pivot);
        for row in col + 1..n {
            let f = a[row][col] / a[col][col];
            for k in col..n {
                a[row][k] -= f * a[col][k];
            }
            b[row] -= f * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let s: f64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - s) / a[row][row];
    }
    x
}

/// PageRank as the solution of the linear system `(I − αAᵀ_norm − α·v·dᵀ) P = (1−α)·v`.
pub(crate) fn dense_pagerank(g: &Csr, alpha: f64, teleport: Option<&[f64]>) -> Vec<f64> {
    let n = g.n();
    let v: Vec<f64> = match teleport {
        Some(t) => {
            let s: f64 = t.iter().sum();
            t.iter().map(|x| x / s).collect()
        }
        None => vec![1.0 / n as f64; n],
    };
    let mut a = vec![vec![0.0; n]; n];
    for (i, row) in a.iter_mut().enumerate() {
        row[i] = 1.0;
    }
    for j in 0..n as u32 {
        let out = g.out(j);
        if out.is_empty() {
            for i in 0..n {
                a[i][j as usize] -= alpha * v[i];
            }
        }
        for &i in out {
            a[i as usize][j as usize] -= alpha / out.len() as f64;
        }
    }
    solve(a, v.iter().map(|x| (1.0 - alpha) * x).collect())
}
