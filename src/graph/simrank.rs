//! SimRank (SPEC §2.4, book §5.4 eq. 5.10, Jeh & Widom 2002):
//! ```text
//! s(a,a) = 1;   s(a,b) = C / (|I(a)||I(b)|) · Σ_{i∈I(a)} Σ_{j∈I(b)} s(i,j),   0 if I(a) or I(b) empty
//! ```
//! Two ways to compute it:
//! - [`simrank_exact`]: all pairs, iterated `k` times from `s_0 = I`, with the partial-sums
//!   optimisation (`partial_a(j) = Σ_{i∈I(a)} s(i,j)` computed once per row): O(k·n·m) time and
//!   2·n² f64 of memory, hence a node limit (default 20 000 nodes = 6.4 GB).
//! - [`simrank_single_source`]: Monte Carlo for any graph size (Fogaras & Rácz 2005), memory
//!   O(n) per query plus a [`ReverseWalkIndex`] of 12 bytes per link built once per graph. After
//!   `k` iterations, `s_k(a,b) = E[C^τ · 1{τ ≤ k}]` where τ is the first meeting time of two
//!   reverse random walks from a and b (each step to a uniformly chosen in-neighbour; a walk
//!   at a page without in-links stops). Walks are coupled: at step t, all walks standing on
//!   node w move to the same random in-neighbour σ_t(w). Walks on different nodes still move
//!   independently, so the first-meeting law is unchanged, but for one sample the set of nodes
//!   whose walk meets a's walk by step t can be found backwards from a's walk position, for all
//!   b at once: the walks at level t−1 that step to y are the out-neighbours w of y with
//!   σ_t(w) = y, and so on down to level 0.
//!
//!   σ_t(w) is not stored: it is the w-th output of a SplitMix64 stream keyed by (seed,
//!   sample, t), reduced to an in-link position by a 128-bit multiply. So σ is consistent
//!   within a sample however often it is asked, costs nothing to reset between samples, and the
//!   backward step reads v's out-links and the index sequentially (no random access into
//!   in-link lists); links to heavily linked pages are pulled instead when the frontier is
//!   large (see [`ReverseWalkIndex`]). Samples run in parallel in a fixed number of chunks,
//!   summed in order: the estimates depend on the seed only, not on the number of threads.
//!
//!   **Cost.** Per sample, every (level, node) whose walk meets a's walk is visited, so a query
//!   costs at least R times the number of walks that meet a's walk. On graphs where walks
//!   gather on hubs this is large: on the Rust docs, `core/all.html` (26k out-links) and the
//!   `core::arch` indices send thousands of walks through one page at every other step, and a
//!   query takes seconds (docs/BENCHMARKS.md, "Link analysis").
//!
//! **Error bound (SPEC §2.4).** Each sample gives every b a value in [0, C], and the estimate is
//! the mean of R independent samples, unbiased for `s_k` (the in-neighbour choices are
//! pseudo-random, as with any PRNG; the position mapping favours no in-link by more than
//! 2^-64). By Hoeffding and a union bound over the n nodes, with probability at least 1 − δ
//! every estimate is within `ε = C · sqrt(ln(2n/δ) / (2R))` of `s_k`; `s_k` is itself within
//! `C^{k+1}` of the limit SimRank (truncation at walk length k). [`MonteCarloParams::error_bound`]
//! computes ε; the tests check it against [`simrank_exact`] on random graphs of a few hundred
//! nodes. With the defaults (R = 1000, k = 10, C = 0.8) on the Rust docs' ~33k pages,
//! ε ≈ 0.076 at δ = 10^-3, and C^{11} ≈ 0.086.

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
    /// Seed of the random in-neighbour choices: the same seed gives the same estimates.
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

    fn check(&self, g: &Csr, source: u32) -> Result<()> {
        check_decay(self.decay)?;
        check_nodes(&[source], g.n())?;
        if self.samples == 0 {
            return Err(GraphError::InvalidParameter {
                name: "samples",
                message: "at least one Monte Carlo sample is needed".into(),
            });
        }
        Ok(())
    }
}

/// What the Monte Carlo estimator reads besides the graph: each node's out-links v→w with w's
/// in-degree and v's position among w's in-links, so "does w's walk step to v" is a hash of w
/// and a comparison, read sequentially with no look-up in w's in-link list. Each out-list is
/// split: links to *light* targets (in-degree below [`HEAVY_IN_DEGREE`]) first, then links to
/// *heavy* ones. A frontier of many pages that all link to the same heavy targets (rustdoc's
/// thousands of intrinsics, each linking to `core/index.html`) would test each heavy target
/// once per frontier page; instead the heavy targets are then *pulled*: σ(w) is drawn once per
/// heavy w and looked up in the frontier. Built once per graph in O(n + m) time, 12 bytes per
/// link; serving keeps it beside the graph (`crate::links::LinkData`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReverseWalkIndex {
    n: usize,
    /// Out-list of v: `targets[offsets[v]..offsets[v + 1]]`, light ones before `split[v]`.
    offsets: Vec<usize>,
    split: Vec<usize>,
    targets: Vec<u32>,
    /// `(|I(w)|, position of v in I(w))` per out-link v→w, aligned with `targets`.
    slots: Vec<(u32, u32)>,
    /// The heavy nodes, ascending.
    heavy: Vec<u32>,
}

/// In-degree from which a page is heavy (see [`ReverseWalkIndex`]); on the Rust docs' link
/// graph 420 of 33k pages, the targets of 70% of the links.
pub const HEAVY_IN_DEGREE: usize = 64;

impl ReverseWalkIndex {
    pub fn new(g: &Csr) -> Self {
        Self::with_heavy_in_degree(g, HEAVY_IN_DEGREE)
    }

    /// The index with another heavy threshold: the estimates are the same for every threshold
    /// (it only chooses between two ways of finding the same preimages), the time is not.
    pub fn with_heavy_in_degree(g: &Csr, heavy_in_degree: usize) -> Self {
        let n = g.n();
        let is_heavy = |w: u32| g.in_degree(w) >= heavy_in_degree;
        let mut offsets = Vec::with_capacity(n + 1);
        let mut split = Vec::with_capacity(n);
        offsets.push(0);
        for v in 0..n as u32 {
            let out = g.out(v);
            split.push(offsets[v as usize] + out.iter().filter(|&&w| !is_heavy(w)).count());
            offsets.push(offsets[v as usize] + out.len());
        }
        // Light and heavy cursors of each v; visiting targets w in ascending order keeps both
        // parts of every out-list ascending.
        let mut light: Vec<usize> = offsets[..n].to_vec();
        let mut heavy_cursor: Vec<usize> = split.clone();
        let mut targets = vec![0; g.m()];
        let mut slots = vec![(0, 0); g.m()];
        for w in 0..n as u32 {
            let inn = g.inn(w);
            let cursor = if is_heavy(w) {
                &mut heavy_cursor
            } else {
                &mut light
            };
            for (position, &v) in inn.iter().enumerate() {
                let e = &mut cursor[v as usize];
                targets[*e] = w;
                slots[*e] = (inn.len() as u32, position as u32);
                *e += 1;
            }
        }
        let heavy = (0..n as u32).filter(|&w| is_heavy(w)).collect();
        ReverseWalkIndex {
            n,
            offsets,
            split,
            targets,
            slots,
            heavy,
        }
    }

    fn check(&self, g: &Csr) -> Result<()> {
        if self.n == g.n() && self.targets.len() == g.m() {
            Ok(())
        } else {
            Err(GraphError::InvalidParameter {
                name: "reverse-walk index",
                message: format!(
                    "built for {} nodes and {} links, the graph has {} and {}",
                    self.n,
                    self.targets.len(),
                    g.n(),
                    g.m()
                ),
            })
        }
    }

    /// Appends `{w : v→w in out[range], w ≠ skip, σ(w) = v}` for the step keyed `key`.
    #[inline]
    fn push(&self, range: std::ops::Range<usize>, key: u64, skip: u32, into: &mut Vec<u32>) {
        for (&w, &(d, position)) in self.targets[range.clone()].iter().zip(&self.slots[range]) {
            if draw(key, w, d) == position && w != skip {
                into.push(w);
            }
        }
    }
}

/// SplitMix64's output function (Steele, Lea & Flood 2014).
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// SplitMix64's increment (2^64 / golden ratio).
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// The stream key of step `t` (1-based) of sample `r`: the in-neighbour choices σ_t of one
/// sample and step are one SplitMix64 stream, indexed by node.
fn step_key(seed: u64, r: usize, t: usize) -> u64 {
    mix64(mix64(seed ^ mix64(r as u64)) ^ t as u64)
}

/// σ_t(w) as a position in w's in-link list of length `d` ≥ 1: the w-th SplitMix64 output of
/// the step's stream, mapped to `0..d` by a 64×64→128-bit multiply (Lemire), which favours
/// no position by more than 2^-64.
#[inline]
fn draw(key: u64, w: u32, d: u32) -> u32 {
    let h = mix64(key.wrapping_add((w as u64 + 1).wrapping_mul(GAMMA)));
    ((h as u128 * d as u128) >> 64) as u32
}

/// Samples are split into this many chunks, run in parallel and summed in chunk order, so the
/// estimates do not depend on the number of threads.
const CHUNKS: usize = 8;

/// Estimated SimRank of `source` to every node it has positive similarity with in some sample,
/// as `(node, estimate)` pairs sorted by node (the source itself excluded). Builds the
/// [`ReverseWalkIndex`] first; use [`simrank_single_source_all_indexed`] to reuse one.
pub fn simrank_single_source_all(
    g: &Csr,
    source: u32,
    params: &MonteCarloParams,
) -> Result<Vec<(u32, f64)>> {
    params.check(g, source)?;
    simrank_single_source_all_indexed(g, &ReverseWalkIndex::new(g), source, params)
}

/// [`simrank_single_source_all`] with a prebuilt index of `g`.
pub fn simrank_single_source_all_indexed(
    g: &Csr,
    index: &ReverseWalkIndex,
    source: u32,
    params: &MonteCarloParams,
) -> Result<Vec<(u32, f64)>> {
    params.check(g, source)?;
    index.check(g)?;
    let per_chunk = params.samples.div_ceil(CHUNKS);
    let chunks: Vec<Accumulator> = (0..CHUNKS)
        .into_par_iter()
        .map(|c| {
            let samples = c * per_chunk..((c + 1) * per_chunk).min(params.samples);
            let mut acc = Accumulator::new(g.n());
            if !samples.is_empty() {
                Walker::new(g, index, params).run(source, samples, &mut acc);
            }
            acc
        })
        .collect();
    let mut chunks = chunks.into_iter();
    let mut total = chunks.next().expect("CHUNKS > 0");
    for chunk in chunks {
        for &b in &chunk.touched {
            total.add(b, chunk.sum[b as usize]);
        }
    }
    let r = params.samples as f64;
    let mut out: Vec<(u32, f64)> = total
        .touched
        .iter()
        .map(|&b| (b, total.sum[b as usize] / r))
        .collect();
    out.sort_unstable_by_key(|&(b, _)| b);
    Ok(out)
}

/// Per-node sums of `C^τ` over samples, dense, with the list of nodes touched.
struct Accumulator {
    sum: Vec<f64>,
    touched: Vec<u32>,
}

impl Accumulator {
    fn new(n: usize) -> Self {
        Accumulator {
            sum: vec![0.0; n],
            touched: Vec::new(),
        }
    }

    fn add(&mut self, b: u32, weight: f64) {
        let slot = &mut self.sum[b as usize];
        if *slot == 0.0 {
            self.touched.push(b);
        }
        *slot += weight;
    }
}

/// One chunk's samples, with its reusable buffers.
struct Walker<'a> {
    g: &'a Csr,
    index: &'a ReverseWalkIndex,
    params: &'a MonteCarloParams,
    keys: Vec<u64>,
    frontier: Vec<u32>,
    next: Vec<u32>,
    /// `mark[v] == stamp` iff v is in the frontier being expanded (pull side).
    mark: Vec<u32>,
    stamp: u32,
}

impl<'a> Walker<'a> {
    fn new(g: &'a Csr, index: &'a ReverseWalkIndex, params: &'a MonteCarloParams) -> Self {
        Walker {
            g,
            index,
            params,
            keys: vec![0; params.steps + 1],
            frontier: Vec::new(),
            next: Vec::new(),
            mark: vec![0; g.n()],
            stamp: 0,
        }
    }

    fn run(&mut self, source: u32, samples: std::ops::Range<usize>, acc: &mut Accumulator) {
        let (decay, steps) = (self.params.decay, self.params.steps);
        for r in samples {
            for t in 1..=steps {
                self.keys[t] = step_key(self.params.seed, r, t);
            }
            let mut x = source;
            let mut weight = 1.0;
            for t in 1..=steps {
                let inn = self.g.inn(x);
                if inn.is_empty() {
                    break; // a's walk stops: it meets nobody later
                }
                let y = inn[draw(self.keys[t], x, inn.len() as u32) as usize];
                weight *= decay;
                // The walks that first meet a's walk at step t are those at y now but not at x
                // one step earlier (those met before). Level t−1: σ_t(w) = y, w ≠ x; then
                // follow σ_{t−1}, ..., σ_1 backwards to the start nodes. Preimages of disjoint
                // sets are disjoint, so every (level, node) is expanded at most once per sample.
                self.frontier.clear();
                self.frontier.push(y);
                self.expand(self.keys[t], x);
                for s in (1..t).rev() {
                    if self.frontier.is_empty() {
                        break;
                    }
                    self.expand(self.keys[s], u32::MAX);
                }
                for &b in &self.frontier {
                    acc.add(b, weight);
                }
                x = y;
            }
        }
    }

    /// Replaces the frontier F by its preimage `{w ≠ skip : σ(w) ∈ F}` under the step keyed
    /// `key`: light targets pushed from F's out-lists; heavy targets pushed too when F has
    /// fewer links to heavy pages than there are heavy pages, else pulled.
    fn expand(&mut self, key: u64, skip: u32) {
        let index = self.index;
        self.next.clear();
        let heavy_links: usize = self
            .frontier
            .iter()
            .map(|&v| index.offsets[v as usize + 1] - index.split[v as usize])
            .sum();
        let pull = heavy_links > index.heavy.len();
        for &v in &self.frontier {
            let v = v as usize;
            let end = if pull {
                index.split[v]
            } else {
                index.offsets[v + 1]
            };
            index.push(index.offsets[v]..end, key, skip, &mut self.next);
        }
        if pull {
            self.stamp += 1;
            for &v in &self.frontier {
                self.mark[v as usize] = self.stamp;
            }
            for &w in &index.heavy {
                let inn = self.g.inn(w);
                let v = inn[draw(key, w, inn.len() as u32) as usize];
                if self.mark[v as usize] == self.stamp && w != skip {
                    self.next.push(w);
                }
            }
        }
        std::mem::swap(&mut self.frontier, &mut self.next);
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

/// [`simrank_single_source`] with a prebuilt index of `g` (what `/similar` serves).
pub fn simrank_single_source_indexed(
    g: &Csr,
    index: &ReverseWalkIndex,
    source: u32,
    k: usize,
    params: &MonteCarloParams,
) -> Result<Vec<(u32, f64)>> {
    let all = simrank_single_source_all_indexed(g, index, source, params)?;
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

    /// SPEC §2.4: the Monte Carlo estimates are within the documented ε of exact k-step SimRank
    /// (an independent computation), on several random graphs of a few hundred nodes.
    #[test]
    fn monte_carlo_within_its_error_bound() {
        let graphs = [
            ("G(300, 0.01)", random_graph(11, 300, 0.01)),
            ("G(200, 0.03)", random_graph(12, 200, 0.03)),
            ("G(400, 0.005)", random_graph(13, 400, 0.005)),
            (
                "G(300, 0.005) + 10 hubs",
                with_hubs(14, 300, 0.005, 10, 0.3),
            ),
        ];
        for (name, g) in graphs {
            let exact = simrank_exact(&g, 0.8, 10, DEFAULT_EXACT_LIMIT).unwrap();
            let params = MonteCarloParams {
                samples: 4000,
                ..MonteCarloParams::default()
            };
            let eps = params.error_bound(g.n(), 1e-3);
            assert!(eps < 0.05, "{eps}");
            let index = ReverseWalkIndex::new(&g);
            let mut worst: f64 = 0.0;
            let mut above_bound = 0;
            for source in [0u32, 17, 123, 199] {
                let est = simrank_single_source_all_indexed(&g, &index, source, &params).unwrap();
                let mut dense = vec![0.0; g.n()];
                est.iter().for_each(|&(b, s)| dense[b as usize] = s);
                for b in 0..g.n() as u32 {
                    if b != source {
                        let want = exact.get(source, b);
                        worst = worst.max((dense[b as usize] - want).abs());
                        above_bound += usize::from(want > eps);
                    }
                }
            }
            println!(
                "{name}: Monte Carlo max error {worst}, bound {eps}, {above_bound} pairs above it"
            );
            assert!(worst <= eps, "{name}: max error {worst} > bound {eps}");
            // The bound is not vacuous: some similarities are well above it.
            assert!(above_bound > 0, "{name}");
        }
    }

    /// Every in-link is chosen with probability 1/|I(w)| (the walk law the bound assumes).
    #[test]
    fn in_neighbour_draws_are_uniform() {
        for d in [1u32, 2, 3, 7, 50] {
            let mut counts = vec![0u32; d as usize];
            let draws = 20_000 * d as usize;
            for r in 0..draws / 10 {
                for t in 1..=10 {
                    counts[draw(step_key(7, r, t), 42, d) as usize] += 1;
                }
            }
            let expected = draws as f64 / d as f64;
            // 5 standard deviations of a binomial count.
            let tol = 5.0 * (expected * (1.0 - 1.0 / d as f64)).sqrt();
            for (i, &c) in counts.iter().enumerate() {
                assert!(
                    (c as f64 - expected).abs() <= tol.max(1e-9),
                    "d={d} position {i}: {c} vs {expected}"
                );
            }
        }
    }

    #[test]
    fn reverse_walk_index_names_each_links_position() {
        let g = with_hubs(3, 60, 0.05, 3, 0.5);
        let index = ReverseWalkIndex::with_heavy_in_degree(&g, 10);
        assert!(!index.heavy.is_empty() && index.heavy.len() < g.n());
        for v in 0..g.n() {
            let range = index.offsets[v]..index.offsets[v + 1];
            let mut targets = index.targets[range.clone()].to_vec();
            targets.sort_unstable();
            assert_eq!(targets, g.out(v as u32), "node {v}");
            for e in range {
                let (d, position) = index.slots[e];
                let inn = g.inn(index.targets[e]);
                assert_eq!(d as usize, inn.len());
                assert_eq!(inn[position as usize], v as u32);
                let heavy = inn.len() >= 10;
                assert_eq!(heavy, e >= index.split[v]);
                assert_eq!(heavy, index.heavy.contains(&index.targets[e]));
            }
        }
        let other = random_graph(4, 60, 0.05);
        assert!(
            simrank_single_source_indexed(&other, &index, 0, 5, &MonteCarloParams::default())
                .is_err()
        );
    }

    /// Pushing and pulling find the same preimages: the estimates do not depend on the heavy
    /// threshold (all pages heavy, the default, none heavy).
    #[test]
    fn estimates_do_not_depend_on_the_heavy_threshold() {
        let g = with_hubs(8, 300, 0.01, 8, 0.4);
        let params = MonteCarloParams::default();
        for source in [0u32, 3, 150] {
            let ests: Vec<_> = [1, 20, HEAVY_IN_DEGREE, usize::MAX]
                .map(|t| {
                    let index = ReverseWalkIndex::with_heavy_in_degree(&g, t);
                    simrank_single_source_all_indexed(&g, &index, source, &params).unwrap()
                })
                .into();
            assert!(!ests[0].is_empty());
            assert!(ests.iter().all(|e| *e == ests[0]), "source {source}");
        }
    }

    /// The seed alone fixes the estimates, whatever the number of threads.
    #[test]
    fn estimates_do_not_depend_on_threads() {
        let g = with_hubs(5, 300, 0.01, 5, 0.3);
        let params = MonteCarloParams::default();
        let many = simrank_single_source_all(&g, 1, &params).unwrap();
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| simrank_single_source_all(&g, 1, &params).unwrap());
        assert_eq!(many, one);
        assert!(!many.is_empty());
        let other = MonteCarloParams { seed: 1, ..params };
        assert_ne!(simrank_single_source_all(&g, 1, &other).unwrap(), many);
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
