//! SimRank (SPEC §2.4, book §5.4 eq. 5.10, Jeh & Widom 2002):
//! ```text
//! s(a,a) = 1;   s(a,b) = C / (|I(a)||I(b)|) · Σ_{i∈I(a)} Σ_{j∈I(b)} s(i,j),   0 if I(a) or I(b) empty
//! ```
//! Two ways to compute it:
//! - [`simrank_exact`]: all pairs, iterated `k` times from `s_0 = I`, with the partial-sums
//!   optimisation (`partial_a(j) = Σ_{i∈I(a)} s(i,j)` computed once per row): O(k·n·m) time and
//!   2·n² f64 of memory, hence a node limit (default 20 000 nodes = 6.4 GB).
//! - [`SimRankIndex::single_source`]: one source against every node, for any graph size, by
//!   *linearised SimRank with a diagonal correction* (Tian & Xiao, SLING, SIGMOD 2016; Wang et
//!   al., ExactSim, VLDB 2020). With `W` the in-link transition matrix (`W[i,a] = 1/|I(a)|` for
//!   `i ∈ I(a)`), SimRank is the fixed point `S = C·WᵀSW + D` where the diagonal `D` puts the
//!   ones back on the diagonal, so
//!   ```text
//!   S = Σ_{t≥0} C^t (Wᵀ)^t D W^t,    s(u,v) = Σ_t C^t Σ_k π_t^u(k) D_k π_t^v(k)
//!   ```
//!   with `π_t^u = W^t e_u` the distribution of a t-step reverse random walk from u (a walk at a
//!   page without in-links stops, so mass is lost there, which gives `s = 0` when `I(u)` is
//!   empty). `D` is estimated once per graph by `rankd graph` ([`simrank_diagonal`], stored with
//!   the other link scores); a query computes `π_t^u` level by level along in-links, then
//!   `Σ_t C^t (Wᵀ)^t D π_t^u` Horner-style along out-links. Its cost is that of a few sparse
//!   matrix–vector products, whatever the number of walks that meet.
//!
//! `D_k = 1 − E[C^τ]`, τ the first meeting time (≥ 1) of two independent reverse walks from k
//! (Fogaras & Rácz's `s ≈ E[C^τ]`, SPEC §2.4, applied to the diagonal only). Both walks take
//! the same first step with probability `1/|I(k)|`, so `D_k = 1` when `I(k)` is empty,
//! `D_k = 1 − C` when `|I(k)| = 1`, and otherwise
//! `D_k = 1 − C/d − C(1 − 1/d)·E[C^{τ(i,j)}]` for a uniformly drawn pair `i ≠ j` of in-links.
//! `E[C^{τ(i,j)}]` is the probability that walks from i and j meet while a coin that stops the
//! pair with probability `1 − C` before each step has not stopped it (the √c-walks of SLING and
//! ProbeSim, with one coin for the pair): no cut-off bias, 4 steps per pair on average.
//!
//! SPEC §2.4 names Fogaras & Rácz's single-source Monte Carlo (coupled reverse walks from the
//! source, every meeting walk found backwards). rankd used it until its cost, which grows with
//! the number of walks that meet, made `/similar` take seconds on the Rust docs; the walks now
//! serve only the diagonal, where they run once per graph.
//!
//! **Error bound (SPEC §2.4).** The single-source values `s̃(u,v)` approximate the SimRank
//! fixed point `s(u,v)` (the limit of `simrank_exact` as k → ∞; SPEC's k = 10 iterations are
//! within `C^{11}` of it). For every `v ≠ u`, with probability at least 1 − δ over the
//! diagonal's random walks,
//! ```text
//! |s̃(u,v) − s(u,v)| ≤ ε_walk + ε_push + ε_D · min(C, s(u,v)) / (1 − C),
//! ε_D = C · sqrt(ln(2n/δ) / (2R))
//! ```
//! - `ε_walk` ([`QueryParams::walk_error`]): the forward vectors are cut after level T, the
//!   first with `C^{T+1}/(1−C) ≤ ε_walk/2`, and at each level t < T the smallest entries are
//!   dropped (not pushed further) while the dropped mass `r_t` keeps
//!   `Σ_t |r_t|₁·C^{t+1}/(1−C) ≤ ε_walk/2` (the budget grows linearly with t, unused budget
//!   carries over). Mass dropped at level t changes `s(u,v)` by at most
//!   `Σ_{t'>t} C^{t'}·|r_t|₁·max_k π_{t'}^v(k) ≤ |r_t|₁·C^{t+1}/(1−C)`, since `W` does not
//!   increase the 1-norm and `D_k ≤ 1`.
//! - `ε_push` ([`QueryParams::push_error`]): in the Horner pass over H levels, entries of `h_t`
//!   below `θ_t = ε_push / (H·C^t)` are not pushed along out-links. `Wᵀ` averages over
//!   in-links, so it does not increase the ∞-norm, and an error below θ_t at level t reaches
//!   the result scaled by `C^t`: at most `ε_push/H` per level. Deep levels are pruned hardest;
//!   a hub page's out-links are read only while its entry is at least θ_t.
//!   Both pruning errors only lower the estimate (`s̃ ≤ s` with an exact `D`).
//! - `ε_D`: each `D_k` is off by at most `ε_D` (Hoeffding on R values in {0, 1} scaled by
//!   `C(1−1/d)`, and a union bound over the n nodes). The resulting error of `s(u,v)` is
//!   `Σ_{t≥1} C^t Σ_k π_t^u(k) π_t^v(k) ΔD_k`, whose weights sum to at most `C/(1−C)` and,
//!   because every `D_k ≥ 1 − C`, to at most `s(u,v)/(1−C)`: the diagonal's error is relative
//!   for small similarities.
//!
//! [`DiagonalParams::error_bound`] and [`QueryParams::error_bound`] compute the terms; the tests
//! check them against [`simrank_exact`] on the Jeh & Widom example and random graphs of a few
//! hundred nodes. Defaults: R = 10 000, ε_walk = 0.01, ε_push = 0.005, so on the Rust docs'
//! 33k pages ε_D ≈ 0.024 at δ = 10^-3 and the bound is `0.015 + 0.12·min(C, s)`
//! (docs/BENCHMARKS.md, "Link analysis").
//!
//! **Cost.** A query is at most T + 1 forward and T Horner levels (T = 30 with the defaults),
//! each a sparse product along the links of the kept entries, or, once those are more than a
//! third of the links, a dense pulled product over all links (PageRank's kernel, rayon over
//! fixed row chunks, so the result does not depend on the number of threads): O(T·(n + m))
//! at worst, whatever the number of walks that meet. The diagonal costs R pairs of walks per
//! node with two or more in-links, once per graph (`rankd graph`, rayon over nodes).

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::csr::gather_sum;
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
    // A total order (score, then id): selecting the top k first gives the same list as
    // sorting everything.
    let order = |x: &(u32, f64), y: &(u32, f64)| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0));
    if k == 0 {
        return Vec::new();
    }
    if k < v.len() {
        v.select_nth_unstable_by(k - 1, order);
        v.truncate(k);
    }
    v.sort_unstable_by(order);
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

/// SplitMix64's output function (Steele, Lea & Flood 2014).
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// SplitMix64: one stream per node, so the diagonal depends on the seed only, not on the
/// number of threads.
struct SplitMix64(u64);

impl SplitMix64 {
    fn for_node(seed: u64, k: u32) -> Self {
        SplitMix64(mix64(seed ^ mix64(k as u64 + 1)))
    }

    fn next(&mut self) -> u64 {
        // SplitMix64's increment (2^64 / golden ratio).
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `0..d` (d ≥ 1) by a 64×64→128-bit multiply (Lemire), which favours no value
    /// by more than 2^-64.
    fn below(&mut self, d: usize) -> usize {
        ((self.next() as u128 * d as u128) >> 64) as usize
    }
}

/// How the diagonal correction `D` is estimated (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DiagonalParams {
    /// C; SPEC default 0.8.
    pub decay: f64,
    /// Pairs of walks per node with at least two in-links (R).
    pub samples: usize,
    /// Seed of the walks: the same seed gives the same diagonal.
    pub seed: u64,
}

impl Default for DiagonalParams {
    fn default() -> Self {
        DiagonalParams {
            decay: 0.8,
            samples: 10_000,
            seed: 0x5eed,
        }
    }
}

impl DiagonalParams {
    /// ε_D: with probability ≥ 1 − δ every estimated `D_k` of an n-node graph is within ε_D of
    /// the exact one (Hoeffding + union bound; see the module docs).
    pub fn error_bound(&self, n: usize, delta: f64) -> f64 {
        self.decay
            * ((2.0 * n.max(1) as f64 / delta).ln() / (2.0 * self.samples.max(1) as f64)).sqrt()
    }

    fn check(&self) -> Result<()> {
        check_decay(self.decay)?;
        if self.samples == 0 {
            return Err(GraphError::InvalidParameter {
                name: "SimRank diagonal",
                message: "at least one sample is needed".into(),
            });
        }
        Ok(())
    }
}

/// The diagonal correction of one graph and how it was estimated: what `rankd graph` stores
/// for `/similar` (`LinkScores::simrank`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SimRankDiagonal {
    #[serde(with = "super::f64_bits")]
    pub values: Vec<f64>,
    pub params: DiagonalParams,
}

/// Estimates `D_k` for every node (rayon-parallel over nodes, one random stream per node).
pub fn simrank_diagonal(g: &Csr, params: &DiagonalParams) -> Result<SimRankDiagonal> {
    params.check()?;
    let c = params.decay;
    let values = (0..g.n() as u32)
        .into_par_iter()
        .map(|k| {
            let inn = g.inn(k);
            let d = inn.len();
            if d <= 1 {
                // No in-link: nothing to meet; one: both walks take it.
                return if d == 0 { 1.0 } else { 1.0 - c };
            }
            let mut rng = SplitMix64::for_node(params.seed, k);
            // E[C^τ] for a pair after the first step, τ counted from there: meeting at step τ
            // of the pair means meeting at τ + 1 from k, hence the factor C below.
            let met = (0..params.samples)
                .filter(|_| {
                    let i = rng.below(d);
                    let j = rng.below(d - 1);
                    let j = j + usize::from(j >= i); // uniform over the others
                    walks_meet(g, inn[i], inn[j], c, &mut rng)
                })
                .count();
            let first = 1.0 / d as f64;
            1.0 - c * first - c * (1.0 - first) * met as f64 / params.samples as f64
        })
        .collect();
    Ok(SimRankDiagonal {
        values,
        params: *params,
    })
}

/// 1 if two independent reverse walks from `a ≠ b` meet before the pair is stopped, which
/// happens before each step with probability `1 − C` (and when a walk reaches a page without
/// in-links): they meet at step τ and are still running with probability `C^τ`, so the mean
/// is `E[C^τ]` with no cut-off bias, and a pair takes at most `C/(1 − C)` = 4 steps on average.
fn walks_meet(g: &Csr, mut a: u32, mut b: u32, c: f64, rng: &mut SplitMix64) -> bool {
    loop {
        let (ia, ib) = (g.inn(a), g.inn(b));
        if ia.is_empty() || ib.is_empty() || rng.unit() >= c {
            return false;
        }
        a = ia[rng.below(ia.len())];
        b = ib[rng.below(ib.len())];
        if a == b {
            return true;
        }
    }
}

/// Error targets of a single-source query (see the module docs for what each one bounds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueryParams {
    /// ε_walk: truncation and pruning of the reverse-walk distributions.
    pub walk_error: f64,
    /// ε_push: pruning of the Horner pass along out-links.
    pub push_error: f64,
}

impl Default for QueryParams {
    fn default() -> Self {
        QueryParams {
            walk_error: 0.01,
            push_error: 0.005,
        }
    }
}

impl QueryParams {
    /// The deterministic part of the bound, `ε_walk + ε_push`; add
    /// `ε_D·min(C, s)/(1 − C)` for the diagonal ([`DiagonalParams::error_bound`]).
    pub fn error_bound(&self) -> f64 {
        self.walk_error + self.push_error
    }

    fn check(&self) -> Result<()> {
        for (name, e) in [
            ("SimRank walk error", self.walk_error),
            ("SimRank push error", self.push_error),
        ] {
            if !(e.is_finite() && e > 0.0) {
                return Err(GraphError::InvalidParameter {
                    name,
                    message: format!("{e} is not a positive number"),
                });
            }
        }
        Ok(())
    }

    /// T: the first level with `C^{T+1}/(1−C) ≤ ε_walk/2`.
    fn levels(&self, c: f64) -> usize {
        let mut t = 0;
        while c.powi(t as i32 + 1) / (1.0 - c) > self.walk_error / 2.0 && t < 10_000 {
            t += 1;
        }
        t
    }
}

/// δ of the stated bounds: the diagonal is within ε_D everywhere with probability ≥ 1 − δ.
pub(crate) const DELTA: f64 = 1e-3;

/// What a single-source query found, and what it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct SingleSource {
    /// `(v, s̃(u,v))` for every v ≠ u with a positive estimate, sorted by node.
    pub scores: Vec<(u32, f64)>,
    /// Levels of the reverse-walk distribution computed (≤ T + 1).
    pub levels: usize,
    /// Links read in both passes.
    pub links_read: usize,
    /// The pruning and truncation error this query actually spent (≤ ε_walk + ε_push).
    pub spent_error: f64,
}

/// What a single-source query reads besides the graph: the diagonal and `1/|I(v)|`. Built
/// once per graph (serving keeps it beside the graph, `crate::links::LinkData`).
#[derive(Debug, Clone, PartialEq)]
pub struct SimRankIndex {
    diagonal: SimRankDiagonal,
    inv_in_degree: Vec<f64>,
}

impl SimRankIndex {
    pub fn new(g: &Csr, diagonal: SimRankDiagonal) -> Result<Self> {
        check_decay(diagonal.params.decay)?;
        if diagonal.values.len() != g.n() {
            return Err(GraphError::InvalidParameter {
                name: "SimRank diagonal",
                message: format!(
                    "{} entries for a graph of {} nodes; run `rankd graph` again",
                    diagonal.values.len(),
                    g.n()
                ),
            });
        }
        let inv_in_degree = g.inv_in_degrees();
        Ok(SimRankIndex {
            diagonal,
            inv_in_degree,
        })
    }

    /// The bound (module docs) on the error of an estimate `s̃` found with `params`, holding for
    /// every node with probability at least 1 − [`DELTA`]. The true s it depends on is bounded
    /// from `s̃` by the same inequality.
    pub fn error_bound(&self, params: &QueryParams, estimate: f64) -> f64 {
        let c = self.diagonal.params.decay;
        let eps_q = params.error_bound();
        let relative = self
            .diagonal
            .params
            .error_bound(self.inv_in_degree.len(), DELTA)
            / (1.0 - c);
        let s_max = if relative < 1.0 {
            ((estimate + eps_q) / (1.0 - relative)).min(c)
        } else {
            c
        };
        eps_q + relative * s_max
    }

    /// `s̃(source, v)` for every v (see the module docs for the method and its error bound).
    pub fn single_source(
        &self,
        g: &Csr,
        source: u32,
        params: &QueryParams,
    ) -> Result<SingleSource> {
        params.check()?;
        check_nodes(&[source], g.n())?;
        if self.inv_in_degree.len() != g.n() {
            return Err(GraphError::InvalidParameter {
                name: "SimRank index",
                message: format!(
                    "built for {} nodes, the graph has {}",
                    self.inv_in_degree.len(),
                    g.n()
                ),
            });
        }
        let c = self.diagonal.params.decay;
        let d = &self.diagonal.values;
        let n = g.n();
        let mut links_read = 0;

        // Forward: π̃_0 = e_u, π̃_{t+1} = W·(π̃_t minus the dropped entries), dense vectors.
        let max_level = params.levels(c);
        let budget = params.walk_error / 2.0;
        let mut spent = 0.0;
        let mut first = vec![0.0; n];
        first[source as usize] = 1.0;
        let mut levels: Vec<Vec<f64>> = vec![first];
        let mut y = vec![0.0; n];
        for t in 0..max_level {
            let cur = levels.last().expect("level 0 exists");
            let weight = c.powi(t as i32 + 1) / (1.0 - c);
            let allowed_mass = (budget * (t + 1) as f64 / max_level as f64 - spent) / weight;
            let (cutoff, dropped) = prune_cutoff(cur, allowed_mass);
            spent += dropped * weight;
            // y(k) = π̃_t(k)/|I(k)| for the kept k; π̃_{t+1}(i) = Σ_{k: i ∈ I(k)} y(k).
            for ((yk, &p), &inv) in y.iter_mut().zip(cur).zip(&self.inv_in_degree) {
                *yk = if p > 0.0 && bucket(p) < cutoff {
                    p * inv
                } else {
                    0.0
                };
            }
            let next = propagate(&y, g.in_adjacency(), g.out_adjacency(), &mut links_read);
            if next.is_none() {
                break;
            }
            levels.extend(next);
        }
        // What the cut at the last level costs (≤ ε_walk/2 by the choice of T).
        if levels.len() > max_level {
            let mass: f64 = levels[max_level].iter().sum();
            spent += mass * c.powi(max_level as i32 + 1) / (1.0 - c);
        }

        // Horner: h_H = D∘π̃_H, h_{t−1} = D∘π̃_{t−1} + C·Wᵀ(h_t without entries below θ_t).
        // An error below θ_t at level t reaches the result scaled by C^t, so the H levels share
        // ε_push equally with θ_t = ε_push / (H·C^t): deep levels, scaled down most, are pruned
        // hardest.
        let horner_levels = levels.len() - 1;
        let mut h = levels.pop().expect("level 0 exists");
        h.iter_mut().zip(d).for_each(|(x, dk)| *x *= dk);
        let mut pushed_error = 0.0;
        for t in (1..=horner_levels).rev() {
            let theta = params.push_error / (horner_levels as f64 * c.powi(t as i32));
            let mut skipped: f64 = 0.0;
            // (C·Wᵀh)(v) = C/|I(v)| · Σ_{i∈I(v)} h(i).
            for (yi, &x) in y.iter_mut().zip(&h) {
                *yi = if x >= theta {
                    c * x
                } else {
                    skipped = skipped.max(x);
                    0.0
                };
            }
            pushed_error += c.powi(t as i32) * skipped;
            let prev = levels.pop().expect("one level per Horner step");
            h = match propagate(&y, g.out_adjacency(), g.in_adjacency(), &mut links_read) {
                Some(mut next) => {
                    for (((x, &p), &inv), &dk) in
                        next.iter_mut().zip(&prev).zip(&self.inv_in_degree).zip(d)
                    {
                        *x = *x * inv + dk * p;
                    }
                    next
                }
                None => prev.iter().zip(d).map(|(p, dk)| p * dk).collect(),
            };
        }
        let scores: Vec<(u32, f64)> = h
            .into_iter()
            .enumerate()
            .filter(|&(v, s)| v != source as usize && s > 0.0)
            .map(|(v, s)| (v as u32, s))
            .collect();
        Ok(SingleSource {
            scores,
            levels: horner_levels + 1,
            links_read,
            spent_error: spent + pushed_error,
        })
    }

    /// The `k` nodes most similar to `source` (excluding it, positive estimates only), best
    /// first, ties by node id: what `GET /similar` serves.
    pub fn top_k(
        &self,
        g: &Csr,
        source: u32,
        k: usize,
        params: &QueryParams,
    ) -> Result<Vec<(u32, f64)>> {
        let all = self.single_source(g, source, params)?;
        Ok(top_positive(all.scores.into_iter(), source, k))
    }
}

/// `next(w) = Σ_{v: w ∈ adj(v)} x(v)` for a dense `x` (`None` when it is all zero). Pushes
/// along `adj` from the nonzero entries when they have few links, else pulls along the
/// transposed adjacency `rev`: sequential reads and no scattered writes, the PageRank-style
/// product, in parallel over fixed row chunks (so the sums do not depend on the threads).
fn propagate(
    x: &[f64],
    adj: (&[usize], &[u32]),
    rev: (&[usize], &[u32]),
    links_read: &mut usize,
) -> Option<Vec<f64>> {
    let n = x.len();
    let mut pushed = 0;
    let mut nonzero = false;
    for (v, &xv) in x.iter().enumerate() {
        if xv != 0.0 {
            nonzero = true;
            pushed += adj.0[v + 1] - adj.0[v];
        }
    }
    if !nonzero {
        return None;
    }
    let mut out = vec![0.0; n];
    // A pushed link costs a scattered write, a pulled one a gathered read: pull once the push
    // would touch more than a third of the links.
    if pushed * 3 < adj.1.len() {
        *links_read += pushed;
        for (v, &xv) in x.iter().enumerate() {
            if xv != 0.0 {
                for &w in &adj.1[adj.0[v]..adj.0[v + 1]] {
                    out[w as usize] += xv;
                }
            }
        }
    } else {
        *links_read += rev.1.len();
        gather_sum(rev.0, rev.1, x, &mut out, true);
    }
    Some(out)
}

/// Probability buckets by binary exponent: bucket b holds values in [2^-(b+1), 2^-b), the last
/// one everything smaller.
const BUCKETS: usize = 64;

fn bucket(p: f64) -> usize {
    let exponent = ((p.to_bits() >> 52) & 0x7ff) as i64 - 1023;
    (-exponent - 1).clamp(0, BUCKETS as i64 - 1) as usize
}

/// The smallest-value buckets whose total mass stays within `allowed_mass`: entries in bucket
/// `cutoff` or beyond are dropped. Returns `(cutoff, dropped mass)`; O(entries).
fn prune_cutoff(entries: &[f64], allowed_mass: f64) -> (usize, f64) {
    let mut mass = [0.0; BUCKETS];
    for &p in entries.iter().filter(|&&p| p > 0.0) {
        mass[bucket(p)] += p;
    }
    let mut dropped = 0.0;
    let mut cutoff = BUCKETS;
    while cutoff > 0 && dropped + mass[cutoff - 1] <= allowed_mass {
        cutoff -= 1;
        dropped += mass[cutoff];
    }
    (cutoff, dropped)
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

    /// G(n, p) plus a few "module index" pages linking to a large share of the graph, half of
    /// which link back, as in rustdoc: reverse walks then gather on pages of high in- and
    /// out-degree, and big frontiers expand through heavy targets.
    fn with_hubs(seed: u64, n: usize, p: f64, hubs: u32, share: f64) -> Csr {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut edges: Vec<(u32, u32)> = random_graph(seed, n, p).edges().collect();
        for h in 0..hubs {
            for t in 0..n as u32 {
                if t != h && rng.random::<f64>() < share {
                    edges.push((h, t));
                    if rng.random::<f64>() < 0.5 {
                        edges.push((t, h)); // the page links back to its index
                    }
                }
            }
        }
        Csr::from_edges(n, &edges).unwrap().0
    }

    /// Oracle: the exact diagonal correction of a graph whose SimRank `s` is known,
    /// `D_k = 1 − C/|I(k)|² · Σ_{i,j∈I(k)} s(i,j)` (1 without in-links).
    fn exact_diagonal(g: &Csr, s: &SimRankMatrix, c: f64) -> Vec<f64> {
        (0..g.n() as u32)
            .map(|k| {
                let inn = g.inn(k);
                if inn.is_empty() {
                    return 1.0;
                }
                let sum: f64 = inn
                    .iter()
                    .flat_map(|&i| inn.iter().map(move |&j| s.get(i, j)))
                    .sum();
                1.0 - c * sum / (inn.len() * inn.len()) as f64
            })
            .collect()
    }

    /// The SimRank fixed point: enough iterations that `simrank_exact` is within C^{k+1} ≈ 2e-10
    /// of it.
    fn fixed_point(g: &Csr) -> SimRankMatrix {
        simrank_exact(g, 0.8, 100, DEFAULT_EXACT_LIMIT).unwrap()
    }

    fn dense(n: usize, scores: &[(u32, f64)]) -> Vec<f64> {
        let mut v = vec![0.0; n];
        scores.iter().for_each(|&(b, s)| v[b as usize] = s);
        v
    }

    fn test_graphs() -> Vec<(&'static str, Csr)> {
        vec![
            ("G(300, 0.01)", random_graph(11, 300, 0.01)),
            ("G(200, 0.03)", random_graph(12, 200, 0.03)),
            ("G(400, 0.005)", random_graph(13, 400, 0.005)),
            (
                "G(300, 0.005) + 10 hubs",
                with_hubs(14, 300, 0.005, 10, 0.3),
            ),
        ]
    }

    /// With the exact diagonal, the query's own error is at most ε_walk + ε_push and only ever
    /// lowers the estimate, for every source and every node.
    #[test]
    fn query_with_exact_diagonal_is_within_its_bound() {
        for (name, g) in test_graphs() {
            let exact = fixed_point(&g);
            let diagonal = SimRankDiagonal {
                values: exact_diagonal(&g, &exact, 0.8),
                params: DiagonalParams::default(),
            };
            let index = SimRankIndex::new(&g, diagonal).unwrap();
            for params in [
                QueryParams::default(),
                QueryParams {
                    walk_error: 0.02,
                    push_error: 0.02,
                },
                QueryParams {
                    walk_error: 1e-6,
                    push_error: 1e-6,
                },
            ] {
                let bound = params.error_bound();
                let mut worst: f64 = 0.0;
                for source in 0..g.n() as u32 {
                    let got = index.single_source(&g, source, &params).unwrap();
                    assert!(got.spent_error <= bound * (1.0 + 1e-12), "{name}");
                    let got = dense(g.n(), &got.scores);
                    for (v, &s) in got.iter().enumerate() {
                        if v as u32 == source {
                            continue;
                        }
                        let want = exact.get(source, v as u32);
                        assert!(s <= want + 1e-9, "{name}: s({source},{v}) = {s} > {want}");
                        worst = worst.max(want - s);
                    }
                }
                println!("{name}, ε = {bound}: worst error {worst}");
                assert!(worst <= bound + 1e-9, "{name}: {worst} > {bound}");
            }
        }
    }

    /// The Monte Carlo diagonal is within ε_D of the exact one on every node, and the full
    /// single-source estimate within `ε_walk + ε_push + ε_D·min(C, s)/(1 − C)` of exact SimRank.
    #[test]
    fn single_source_within_its_error_bound() {
        let delta = 1e-3;
        for (name, g) in test_graphs() {
            let exact = fixed_point(&g);
            let params = DiagonalParams::default();
            let diagonal = simrank_diagonal(&g, &params).unwrap();
            let eps_d = params.error_bound(g.n(), delta);
            let want_d = exact_diagonal(&g, &exact, 0.8);
            let worst_d = diagonal
                .values
                .iter()
                .zip(&want_d)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            println!("{name}: diagonal max error {worst_d}, ε_D = {eps_d}");
            assert!(worst_d <= eps_d, "{name}: {worst_d} > {eps_d}");

            let index = SimRankIndex::new(&g, diagonal).unwrap();
            let query = QueryParams::default();
            let (mut worst_ratio, mut above): (f64, usize) = (0.0, 0);
            for source in 0..g.n() as u32 {
                let got = index.single_source(&g, source, &query).unwrap();
                let got = dense(g.n(), &got.scores);
                for v in (0..g.n() as u32).filter(|&v| v != source) {
                    let want = exact.get(source, v);
                    let bound = query.error_bound() + eps_d * want.min(0.8) / 0.2;
                    let err = (got[v as usize] - want).abs();
                    worst_ratio = worst_ratio.max(err / bound);
                    above += usize::from(want > 2.0 * bound);
                }
            }
            println!("{name}: worst error / bound {worst_ratio}, {above} pairs above 2·bound");
            assert!(worst_ratio <= 1.0, "{name}: {worst_ratio}");
            assert!(above > 0, "{name}: the bound is vacuous");
        }
    }

    /// The top k agrees with the exact one wherever neighbouring exact values are further
    /// apart than the two estimates' error bounds.
    #[test]
    fn top_k_matches_exact_where_gaps_exceed_the_bound() {
        let g = with_hubs(21, 300, 0.01, 6, 0.3);
        let exact = fixed_point(&g);
        let params = DiagonalParams::default();
        let eps_d = params.error_bound(g.n(), 1e-3);
        let index = SimRankIndex::new(&g, simrank_diagonal(&g, &params).unwrap()).unwrap();
        // Tight query errors, so that the diagonal's (relative) error decides which gaps count.
        let query = QueryParams {
            walk_error: 1e-4,
            push_error: 1e-4,
        };
        let bound = |s: f64| query.error_bound() + eps_d * s.min(0.8) / 0.2;
        // What `/similar` reports covers the bound at the true value.
        for s in [0.0, 0.01, 0.1, 0.5, 0.8] {
            assert!(index.error_bound(&query, s) >= bound(s));
            assert!(index.error_bound(&query, (s - bound(s)).max(0.0)) >= bound(s) - 1e-12);
        }
        let mut checked = 0;
        for source in 0..g.n() as u32 {
            let want = exact.top_k(source, 11);
            let got = index.top_k(&g, source, 10, &query).unwrap();
            for (rank, (v, s)) in want.iter().take(10).enumerate() {
                // v's rank is determined when it is separated from its neighbours above and
                // below by more than both bounds.
                let separated = |other: Option<&(u32, f64)>| {
                    other.is_none_or(|o| (o.1 - s).abs() > bound(o.1) + bound(*s))
                };
                let above = rank.checked_sub(1).and_then(|r| want.get(r));
                let below = want.get(rank + 1).or(Some(&(u32::MAX, 0.0)));
                if separated(above)
                    && separated(below)
                    && want[..rank].iter().all(|w| separated(Some(w)))
                {
                    assert_eq!(
                        got.get(rank).map(|e| e.0),
                        Some(*v),
                        "source {source} rank {rank}"
                    );
                    checked += 1;
                }
            }
        }
        println!("{checked} top-10 positions checked");
        assert!(checked >= 20, "{checked}");
    }

    #[test]
    fn jeh_widom_single_source() {
        let (g, _) = Csr::from_edges(5, &[(0, 1), (0, 2), (1, 3), (2, 4), (4, 2), (3, 0)]).unwrap();
        let exact = fixed_point(&g);
        let params = DiagonalParams::default();
        let diagonal = simrank_diagonal(&g, &params).unwrap();
        // Every page has one in-link except ProfB (2): the diagonal is exact there.
        for k in [0, 1, 3, 4] {
            assert_eq!(diagonal.values[k], 1.0 - 0.8);
        }
        let index = SimRankIndex::new(&g, diagonal).unwrap();
        let query = QueryParams::default();
        let eps_d = params.error_bound(5, 1e-3);
        for a in 0..5u32 {
            let got = dense(5, &index.single_source(&g, a, &query).unwrap().scores);
            for b in (0..5u32).filter(|&b| b != a) {
                let want = exact.get(a, b);
                let bound = query.error_bound() + eps_d * want.min(0.8) / 0.2;
                assert!((got[b as usize] - want).abs() <= bound, "s({a},{b})");
            }
        }
        // ProfA's most similar page is ProfB (0.414), then StudentB (0.106).
        let top = index.top_k(&g, 1, 2, &query).unwrap();
        assert_eq!(top.iter().map(|e| e.0).collect::<Vec<_>>(), [2, 4]);
    }

    /// Pruning is what keeps hubs cheap: the same query with a far looser push error reads far
    /// fewer links (and stays within its own bound, checked above).
    #[test]
    fn pruning_limits_the_links_read_from_hubs() {
        let g = with_hubs(31, 2000, 0.002, 4, 0.9);
        let index = SimRankIndex::new(
            &g,
            simrank_diagonal(&g, &DiagonalParams::default()).unwrap(),
        )
        .unwrap();
        let tight = QueryParams {
            walk_error: 1e-9,
            push_error: 1e-9,
        };
        let read = |p: &QueryParams| index.single_source(&g, 7, p).unwrap().links_read;
        let (tight, default) = (read(&tight), read(&QueryParams::default()));
        println!("links read: tight {tight}, default {default}");
        assert!(default * 3 < tight, "{default} vs {tight}");
    }

    /// The seed alone fixes the diagonal, whatever the number of threads.
    #[test]
    fn diagonal_does_not_depend_on_threads() {
        let g = with_hubs(5, 300, 0.01, 5, 0.3);
        let params = DiagonalParams {
            samples: 200,
            ..DiagonalParams::default()
        };
        let many = simrank_diagonal(&g, &params).unwrap();
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| simrank_diagonal(&g, &params).unwrap());
        assert_eq!(many, one);
        let other = DiagonalParams { seed: 1, ..params };
        assert_ne!(simrank_diagonal(&g, &other).unwrap(), many);
    }

    #[test]
    fn bad_input_is_an_error_and_empty_cases_are_empty() {
        let (g, _) = Csr::from_edges(3, &[(0, 1)]).unwrap();
        assert!(simrank_exact(&g, 1.5, 10, 100).is_err());
        assert!(simrank_exact(&g, 0.8, 10, 2).is_err());
        let zero = DiagonalParams {
            samples: 0,
            ..DiagonalParams::default()
        };
        assert!(simrank_diagonal(&g, &zero).is_err());
        let bad_decay = DiagonalParams {
            decay: f64::NAN,
            ..DiagonalParams::default()
        };
        assert!(simrank_diagonal(&g, &bad_decay).is_err());
        let diagonal = simrank_diagonal(&g, &DiagonalParams::default()).unwrap();
        let index = SimRankIndex::new(&g, diagonal.clone()).unwrap();
        let query = QueryParams::default();
        // Unknown source.
        assert!(index.single_source(&g, 9, &query).is_err());
        // Bad error targets.
        for e in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let p = QueryParams {
                walk_error: e,
                ..query
            };
            assert!(index.single_source(&g, 0, &p).is_err(), "{e}");
        }
        // A node without in-links is similar to nothing; 1 and 2 have no common in-link history.
        assert!(index.top_k(&g, 0, 10, &query).unwrap().is_empty());
        assert!(index.top_k(&g, 2, 10, &query).unwrap().is_empty());
        // A diagonal for another graph.
        let (other, _) = Csr::from_edges(4, &[(0, 1)]).unwrap();
        assert!(SimRankIndex::new(&other, diagonal).is_err());
        assert!(index.single_source(&other, 0, &query).is_err());
        // The empty graph.
        let (empty, _) = Csr::from_edges(0, &[]).unwrap();
        let d = simrank_diagonal(&empty, &DiagonalParams::default()).unwrap();
        assert!(d.values.is_empty());
        let index = SimRankIndex::new(&empty, d).unwrap();
        assert!(index.single_source(&empty, 0, &query).is_err());
    }

    /// Estimates are finite and in [0, 1/(1 − C)] on graphs with self-loops removed, dangling
    /// pages, and a loose error target.
    #[test]
    fn estimates_are_finite() {
        let g = with_hubs(41, 500, 0.004, 3, 0.5);
        let index = SimRankIndex::new(
            &g,
            simrank_diagonal(&g, &DiagonalParams::default()).unwrap(),
        )
        .unwrap();
        for params in [
            QueryParams::default(),
            QueryParams {
                walk_error: 10.0,
                push_error: 10.0,
            },
        ] {
            for source in 0..g.n() as u32 {
                let got = index.single_source(&g, source, &params).unwrap();
                assert!(got
                    .scores
                    .iter()
                    .all(|&(_, s)| s.is_finite() && s > 0.0 && s <= 1.0 + 1e-9));
            }
        }
    }
}
