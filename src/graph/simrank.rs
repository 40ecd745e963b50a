//! SimRank (SPEC §2.4, book §5.4 eq. 5.10, Jeh & Widom 2002):
//! ```text
//! s(a,a) = 1;   s(a,b) = C / (|I(a)||I(b)|) · Σ_{i∈I(a)} Σ_{j∈I(b)} s(i,j),   0 if I(a) or I(b) empty
//! ```
//! Two ways to compute it:
//! - [`simrank_exact`]: all pairs, iterated `k` times from `s_0 = I`, with the partial-sums
//!   optimisation (`partial_a(j) = Σ_{i∈I(a)} s(i,j)` computed once per row): O(k·n·m) time and
//!   2·n² f64 of memory, hence a node limit (default 20 000 nodes = 6.4 GB).
//! - [`simrank_single_source`]: Monte Carlo for any graph size (Fogaras & Rácz 2005), memory
//!   O(k·n) per query. After
//!   `k` iterations, `s_k(a,b) = E[C^τ · 1{τ ≤ k}]` where τ is the first meeting time of two
//!   reverse random walks from a and b (each step to a uniformly chosen in-neighbour; a walk
//!   at a page without in-links stops). Walks are coupled: at step t, all walks standing on
//!   node w move to the same random in-neighbour σ_t(w). Walks on different nodes still move
//!   independently, so the first-meeting law is unchanged, but for one sample the set of nodes
//!   whose walk meets a's walk by step t can be found backwards from a's walk position, for all
//!   b at once.
//!
//! **Error bound.** Each sample gives every b a value in [0, C], and the estimate is the mean of
//! R independent samples, unbiased for `s_k`. By Hoeffding and a union bound over the n nodes,
//! with probability at least 1 − δ every estimate is within
//! `ε = C · sqrt(ln(2n/δ) / (2R))` of `s_k`; `s_k` is itself within `C^{k+1}` of the limit
//! SimRank. [`MonteCarloParams::error_bound`] computes ε.

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::{check_nodes, Csr, GraphError, Result};

/// SPEC §2.4 default node limit for the exact all-pairs computation.
pub const DEFAULT_EXACT_LIMIT: usize = 20_000;

fn check_decay(c: f64) -> Result<()> {
    if c.is_finite() && c > 0.0 && c < 1.0 {
        Ok(())
    } else {
        Err(GraphError::InvalidParameter {
            name: "SimRank decay C",
            message: format!("{c} is not in (0, 1)"),
        })
    }
}

/// All-pairs SimRank, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct SimRankMatrix {
    n: usize,
    values: Vec<f64>,
}

impl SimRankMatrix {
    pub fn n(&self) -> usize {
        self.n
    }

    pub fn get(&self, a: u32, b: u32) -> f64 {
        self.values[a as usize * self.n + b as usize]
    }

    /// Similarities of `a` to every node.
    pub fn row(&self, a: u32) -> &[f64] {
        &self.values[a as usize * self.n..(a as usize + 1) * self.n]
    }

    /// The `k` nodes most similar to `a` (excluding `a`, only positive similarities), best first,
    /// ties by node id.
    pub fn top_k(&self, a: u32, k: usize) -> Vec<(u32, f64)> {
        top_positive(
            self.row(a)
                .iter()
                .copied()
                .enumerate()
                .map(|(b, s)| (b as u32, s)),
            a,
            k,
        )
    }
}

fn top_positive(
    items: impl Iterator<Item = (u32, f64)>,
    exclude: u32,
    k: usize,
) -> Vec<(u32, f64)> {
    let mut v: Vec<(u32, f64)> = items.filter(|&(b, s)| b != exclude && s > 0.0).collect();
    v.sort_unstable_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
    v.truncate(k);
    v
}

/// Exact SimRank after `iterations` iterations with decay `c` (SPEC: C = 0.8, k = 10), for
/// graphs of at most `limit` nodes.
pub fn simrank_exact(g: &Csr, c: f64, iterations: usize, limit: usize) -> Result<SimRankMatrix> {
    check_decay(c)?;
    let n = g.n();
    if n > limit {
        return Err(GraphError::TooLarge {
            what: "exact SimRank",
            n,
            limit,
        });
    }
    let mut s = vec![0.0; n * n];
    for a in 0..n {
        s[a * n + a] = 1.0;
    }
    let mut next = vec![0.0; n * n];
    for _ in 0..iterations {
        next.par_chunks_mut(n.max(1)).enumerate().for_each_init(
            || vec![0.0; n],
            |partial, (a, row)| {
                let ia = g.inn(a as u32);
                row.fill(0.0);
                row[a] = 1.0;
                if ia.is_empty() {
                    return;
                }
                partial.fill(0.0);
                for &i in ia {
                    for (p, x) in partial
                        .iter_mut()
                        .zip(&s[i as usize * n..(i as usize + 1) * n])
                    {
                        *p += x;
                    }
                }
                for (b, slot) in row.iter_mut().enumerate() {
                    let ib = g.inn(b as u32);
                    if b != a && !ib.is_empty() {
                        let sum: f64 = ib.iter().map(|&j| partial[j as usize]).sum();
                        *slot = c / (ia.len() * ib.len()) as f64 * sum;
                    }
                }
            },
        );
        std::mem::swap(&mut s, &mut next);
    }
    Ok(SimRankMatrix { n, values: s })
}

/// Parameters of the Monte Carlo estimator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MonteCarloParams {
    /// C; SPEC default 0.8.
    pub decay: f64,
    /// Walk length k (the estimate is unbiased for k-iteration SimRank); SPEC default 10.
    pub steps: usize,
    /// Number of coupled samples R.
    pub samples: usize,
    /// RNG seed: the same seed gives the same estimates.
    pub seed: u64,
}

impl Default for MonteCarloParams {
    fn default() -> Self {
        MonteCarloParams {
            decay: 0.8,
            steps: 10,
            samples: 1000,
            seed: 0x5eed,
        }
    }
}

impl MonteCarloParams {
    /// ε such that, with probability ≥ 1 − δ, every estimate on an n-node graph is within ε of
    /// k-step SimRank (Hoeffding + union bound; see the module docs).
    pub fn error_bound(&self, n: usize, delta: f64) -> f64 {
        self.decay * ((2.0 * n.max(1) as f64 / delta).ln() / (2.0 * self.samples as f64)).sqrt()
    }
}

/// Estimated SimRank of `source` to every node it has positive similarity with in some sample,
/// as `(node, estimate)` pairs sorted by node (the source itself excluded).
pub fn simrank_single_source_all(
    g: &Csr,
    source: u32,
    params: &MonteCarloParams,
) -> Result<Vec<(u32, f64)>> {
    check_decay(params.decay)?;
    check_nodes(&[source], g.n())?;
    if params.samples == 0 {
        return Err(GraphError::InvalidParameter {
            name: "samples",
            message: "at least one Monte Carlo sample is needed".into(),
        });
    }
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    let mut totals: HashMap<u32, f64> = HashMap::new();
    let mut sigma = Sigma::new(g.n(), params.steps);
    let mut frontier: Vec<u32> = Vec::new();
    let mut next: Vec<u32> = Vec::new();
    for _ in 0..params.samples {
        sigma.next_sample();
        let mut x = source;
        let mut weight = 1.0;
        for t in 1..=params.steps {
            let Some(y) = sigma.draw(g, &mut rng, t, x) else {
                break;
            };
            weight *= params.decay;
            // The walks that first meet a's walk at step t are those at y now but not at x
            // one step earlier (those met before). Level t−1: σ_t(w) = y, w ≠ x; then follow
            // σ_{t−1}, ..., σ_1 backwards to the start nodes. Preimages of disjoint sets are
            // disjoint, so every (level, node) is expanded at most once per sample.
            frontier.clear();
            for &w in g.out(y) {
                if w != x && sigma.draw(g, &mut rng, t, w) == Some(y) {
                    frontier.push(w);
                }
            }
            for s in (1..t).rev() {
                next.clear();
                for &v in &frontier {
                    for &w in g.out(v) {
                        if sigma.draw(g, &mut rng, s, w) == Some(v) {
                            next.push(w);
                        }
                    }
                }
                std::mem::swap(&mut frontier, &mut next);
            }
            for &b in &frontier {
                *totals.entry(b).or_insert(0.0) += weight;
            }
            x = y;
        }
    }
    let r = params.samples as f64;
    let mut out: Vec<(u32, f64)> = totals.into_iter().map(|(b, s)| (b, s / r)).collect();
    out.sort_unstable_by_key(|&(b, _)| b);
    Ok(out)
}

/// The random in-neighbour choices σ_t(w) of one sample, drawn lazily and remembered: dense
/// arrays of `steps · n` entries stamped with the sample number (8 bytes per node and step,
/// allocated once per query), so a new sample costs nothing to start.
struct Sigma {
    n: usize,
    choice: Vec<u32>,
    stamp: Vec<u32>,
    sample: u32,
}

impl Sigma {
    fn new(n: usize, steps: usize) -> Self {
        Sigma {
            n,
            choice: vec![0; n * steps],
            stamp: vec![0; n * steps],
            sample: 0,
        }
    }

    fn next_sample(&mut self) {
        self.sample += 1;
    }

    /// σ_t(w) (t is 1-based): w's random in-neighbour at step t, or None without in-links.
    fn draw(&mut self, g: &Csr, rng: &mut ChaCha8Rng, t: usize, w: u32) -> Option<u32> {
        let inn = g.inn(w);
        if inn.is_empty() {
            return None;
        }
        let slot = (t - 1) * self.n + w as usize;
        if self.stamp[slot] != self.sample {
            self.stamp[slot] = self.sample;
            self.choice[slot] = inn[rng.random_range(0..inn.len())];
        }
        Some(self.choice[slot])
    }
}

/// The `k` nodes most similar to `source` by Monte Carlo SimRank ("find similar documents").
pub fn simrank_single_source(
    g: &Csr,
    source: u32,
    k: usize,
    params: &MonteCarloParams,
) -> Result<Vec<(u32, f64)>> {
    let all = simrank_single_source_all(g, source, params)?;
    Ok(top_positive(all.into_iter(), source, k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::testutil::random_graph;

    #[test]
    fn jeh_widom_figure_1() {
        // 0 Univ, 1 ProfA, 2 ProfB, 3 StudentA, 4 StudentB
        let (g, _) = Csr::from_edges(5, &[(0, 1), (0, 2), (1, 3), (2, 4), (4, 2), (3, 0)]).unwrap();
        let s = simrank_exact(&g, 0.8, 100, DEFAULT_EXACT_LIMIT).unwrap();
        let expected = [
            ((1, 2), 0.41355),
            ((3, 4), 0.33084),
            ((0, 2), 0.13234),
            ((1, 4), 0.10587),
            ((2, 4), 0.08822),
            ((2, 3), 0.04235),
            ((0, 4), 0.03388),
        ];
        for a in 0..5u32 {
            for b in 0..5u32 {
                let want = if a == b {
                    1.0
                } else {
                    expected
                        .iter()
                        .find(|((x, y), _)| (*x, *y) == (a, b) || (*x, *y) == (b, a))
                        .map_or(0.0, |e| e.1)
                };
                assert!(
                    (s.get(a, b) - want).abs() < 5e-6,
                    "s({a},{b}) = {} vs {want}",
                    s.get(a, b)
                );
            }
        }
        assert_eq!(s.top_k(1, 2), vec![(2, s.get(1, 2)), (4, s.get(1, 4))]);
    }

    /// Independent oracle: the definition evaluated naively (double sum over in-neighbour pairs).
    #[test]
    #[allow(clippy::needless_range_loop)] // indices mirror the formula's s(a,b)
    fn partial_sums_equal_naive_iteration() {
        let g = random_graph(7, 25, 0.1);
        let n = g.n();
        let mut s = vec![vec![0.0; n]; n];
        (0..n).for_each(|a| s[a][a] = 1.0);
        for _ in 0..6 {
            let mut next = vec![vec![0.0; n]; n];
            for a in 0..n {
                for b in 0..n {
                    let (ia, ib) = (g.inn(a as u32), g.inn(b as u32));
                    next[a][b] = if a == b {
                        1.0
                    } else if ia.is_empty() || ib.is_empty() {
                        0.0
                    } else {
                        let sum: f64 = ia
                            .iter()
                            .flat_map(|&i| ib.iter().map(move |&j| (i, j)))
                            .map(|(i, j)| s[i as usize][j as usize])
                            .sum();
                        0.8 * sum / (ia.len() * ib.len()) as f64
                    };
                }
            }
            s = next;
        }
        let fast = simrank_exact(&g, 0.8, 6, 100).unwrap();
        for a in 0..n {
            for b in 0..n {
                assert!((fast.get(a as u32, b as u32) - s[a][b]).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn monte_carlo_within_its_error_bound() {
        let g = random_graph(11, 300, 0.01);
        let exact = simrank_exact(&g, 0.8, 10, DEFAULT_EXACT_LIMIT).unwrap();
        let params = MonteCarloParams {
            samples: 4000,
            ..MonteCarloParams::default()
        };
        let eps = params.error_bound(g.n(), 1e-3);
        assert!(eps < 0.05, "{eps}");
        let mut worst: f64 = 0.0;
        for source in [0u32, 17, 123, 299] {
            let est = simrank_single_source_all(&g, source, &params).unwrap();
            let mut dense = vec![0.0; g.n()];
            est.iter().for_each(|&(b, s)| dense[b as usize] = s);
            for b in 0..g.n() as u32 {
                if b != source {
                    worst = worst.max((dense[b as usize] - exact.get(source, b)).abs());
                }
            }
        }
        println!("Monte Carlo max error {worst}, bound {eps}");
        assert!(worst <= eps, "max error {worst} > bound {eps}");
        // The bound is not vacuous: some similarities are well above it.
        assert!((0..g.n() as u32).any(|b| b != 0 && exact.get(0, b) > eps));
    }

    #[test]
    fn bad_input_is_an_error() {
        let (g, _) = Csr::from_edges(3, &[(0, 1)]).unwrap();
        assert!(simrank_exact(&g, 1.5, 10, 100).is_err());
        assert!(simrank_exact(&g, 0.8, 10, 2).is_err());
        assert!(simrank_single_source(&g, 9, 10, &MonteCarloParams::default()).is_err());
        let zero = MonteCarloParams {
            samples: 0,
            ..MonteCarloParams::default()
        };
        assert!(simrank_single_source(&g, 0, 10, &zero).is_err());
        assert!(
            simrank_single_source(&g, 2, 10, &MonteCarloParams::default())
                .unwrap()
                .is_empty()
        );
    }
}
