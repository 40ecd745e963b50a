//! R-MAT graphs (Chakrabarti, Zhan & Faloutsos 2004) with Graph500's parameters: the
//! deterministic synthetic power-law graphs the link-analysis benchmarks run on
//! (`docs/BENCHMARKS.md`, "Link analysis beyond one machine").
//!
//! Each edge picks one quadrant of the 2^scale × 2^scale adjacency matrix per level with
//! probabilities `a, b, c, d` (Graph500: 0.57, 0.19, 0.19, 0.05). As in the Graph500 reference
//! generator, node labels are then permuted by a seeded shuffle so that high-degree nodes are
//! not clustered at small ids (which would flatter a partition by id). Self-loops and duplicate
//! edges are kept here; loaders drop them (SPEC §2). A ChaCha8 stream from a fixed seed makes
//! the same graph on every machine and every Rust release.
//!
//! No maintained crate generates R-MAT graphs with these conventions, and the generator is a
//! dozen lines.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{GraphError, Result};

/// Quadrant probabilities; Graph500's are the default.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RmatParams {
    pub a: f64,
    pub b: f64,
    pub c: f64,
    /// log2 of the number of nodes.
    pub scale: u32,
    /// Edges per node (Graph500: 16).
    pub edge_factor: u64,
    pub seed: u64,
}

impl RmatParams {
    /// Graph500's parameters at `scale` (edge factor 16).
    pub fn graph500(scale: u32, seed: u64) -> Self {
        RmatParams {
            a: 0.57,
            b: 0.19,
            c: 0.19,
            scale,
            edge_factor: 16,
            seed,
        }
    }

    pub fn nodes(&self) -> u64 {
        1u64 << self.scale
    }

    pub fn edges(&self) -> u64 {
        self.edge_factor << self.scale
    }
}

/// Calls `emit(src, dst)` for each of the `edge_factor · 2^scale` generated edges.
pub fn rmat(params: &RmatParams, mut emit: impl FnMut(u32, u32)) -> Result<()> {
    let p = params;
    let d = 1.0 - p.a - p.b - p.c;
    if !(p.a >= 0.0 && p.b >= 0.0 && p.c >= 0.0 && d >= 0.0) {
        return Err(GraphError::InvalidParameter {
            name: "R-MAT probabilities",
            message: format!(
                "a {}, b {}, c {} must be non-negative and sum to at most 1",
                p.a, p.b, p.c
            ),
        });
    }
    if p.scale == 0 || p.scale > 31 {
        return Err(GraphError::InvalidParameter {
            name: "R-MAT scale",
            message: format!("{} is not in 1..=31", p.scale),
        });
    }
    let mut rng = ChaCha8Rng::seed_from_u64(p.seed);
    let mut labels: Vec<u32> = (0..p.nodes() as u32).collect();
    labels.shuffle(&mut rng);
    for _ in 0..p.edges() {
        let (mut u, mut v) = (0u32, 0u32);
        for level in 0..p.scale {
            let r: f64 = rng.random();
            let bit = 1u32 << level;
            if r < p.a {
            } else if r < p.a + p.b {
                v |= bit;
            } else if r < p.a + p.b + p.c {
                u |= bit;
            } else {
                u |= bit;
                v |= bit;
            }
        }
        emit(labels[u as usize], labels[v as usize]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_skewed() {
        let params = RmatParams::graph500(10, 7);
        let mut first = Vec::new();
        rmat(&params, |u, v| first.push((u, v))).unwrap();
        let mut second = Vec::new();
        rmat(&params, |u, v| second.push((u, v))).unwrap();
        assert_eq!(first, second);
        assert_eq!(first.len(), 16 * 1024);
        assert!(first.iter().all(|&(u, v)| u < 1024 && v < 1024));
        // Power law: the top 1% of nodes by out-degree hold far more than 1% of the edges.
        let mut degree = vec![0usize; 1024];
        first.iter().for_each(|&(u, _)| degree[u as usize] += 1);
        degree.sort_unstable_by(|a, b| b.cmp(a));
        let head: usize = degree[..10].iter().sum();
        assert!(head * 10 > first.len(), "top 10 nodes hold {head} edges");
        let mut other = Vec::new();
        rmat(&RmatParams::graph500(10, 8), |u, v| other.push((u, v))).unwrap();
        assert_ne!(first, other);
    }

    #[test]
    fn bad_parameters_are_errors() {
        let mut p = RmatParams::graph500(10, 1);
        p.a = 0.9;
        assert!(rmat(&p, |_, _| {}).is_err());
        assert!(rmat(&RmatParams::graph500(0, 1), |_, _| {}).is_err());
    }
}
