//! PageRank with a teleport vector (SPEC §2.1, book §5.2 eq. 5.1), its personalized form and
//! topic-sensitive PageRank (book §5.3 eq. 5.9).
//!
//! ```text
//! P_i = (1−α)·v_i + α·( Σ_{j→i} P_j / O_j + v_i · Σ_{j dangling} P_j )
//! ```
//! Dangling mass is spread by `v` (the networkx convention), so the scores always sum to 1.
//! The hot loop pulls along in-links from a per-iteration `P_j / O_j` array: one sequential pass
//! over the in-adjacency and one gather per edge.

use rayon::prelude::*;

use super::convergence::{Convergence, IterationReport, TopOrderTracker};
use super::csr::{sum_over, PARALLEL_MIN_EDGES};
use super::{check_damping, check_nodes, Csr, GraphError, Result};

/// Nodes per parallel work item.
const CHUNK: usize = 1 << 12;

/// Parameters of one PageRank run.
#[derive(Debug, Clone, PartialEq)]
pub struct PageRankParams {
    /// α; SPEC default 0.85.
    pub damping: f64,
    /// The teleport distribution `v` (any non-negative weights, normalised here); `None` is
    /// uniform 1/N.
    pub teleport: Option<Vec<f64>>,
    pub convergence: Convergence,
    /// Use rayon across nodes: `None` decides by graph size (at least
    /// `PARALLEL_MIN_EDGES` edges); `Some` forces it (benchmarks compare both).
    pub parallel: Option<bool>,
}

impl Default for PageRankParams {
    fn default() -> Self {
        PageRankParams {
            damping: 0.85,
            teleport: None,
            convergence: Convergence::default(),
            parallel: None,
        }
    }
}

impl PageRankParams {
    /// Personalized PageRank teleporting uniformly to `nodes` (TrustRank's core).
    pub fn teleport_to(mut self, n: usize, nodes: &[u32]) -> Result<Self> {
        self.teleport = Some(teleport_over(n, nodes)?);
        Ok(self)
    }
}

/// A teleport vector uniform over `nodes` (`S(t)/|S(t)|_1` in eq. 5.9).
pub(crate) fn teleport_over(n: usize, nodes: &[u32]) -> Result<Vec<f64>> {
    check_nodes(nodes, n)?;
    if nodes.is_empty() {
        return Err(GraphError::InvalidParameter {
            name: "teleport set",
            message: "it is empty".into(),
        });
    }
    let mut v = vec![0.0; n];
    for &u in nodes {
        v[u as usize] = 1.0;
    }
    let total: f64 = v.iter().sum();
    v.iter_mut().for_each(|x| *x /= total);
    Ok(v)
}

/// PageRank of every node, summing to 1, with how the iteration ended. The iteration starts
/// from the uniform vector (as networkx does) and stops when [`error_bound`] of the last step
/// is below the tolerance; the report's `residual` is that bound. An empty graph gives an
/// empty vector.
pub fn pagerank(g: &Csr, params: &PageRankParams) -> Result<(Vec<f64>, IterationReport)> {
    check_damping(params.damping)?;
    params.convergence.check()?;
    let n = g.n();
    if n == 0 {
        return Ok((Vec::new(), IterationReport::default()));
    }
    let teleport = params
        .teleport
        .as_deref()
        .map(|v| normalised_teleport(v, n))
        .transpose()?;
    let alpha = params.damping;
    let inv_out = g.inv_out_degrees();
    let (in_offsets, in_sources) = g.in_adjacency();
    let parallel = params.parallel.unwrap_or(g.m() >= PARALLEL_MIN_EDGES);
    let conv = params.convergence;

    let mut x = vec![1.0 / n as f64; n];
    let mut next = vec![0.0; n];
    // share[j] = P_j / O_j of the current iterate, and the dangling mass Σ P_j (O_j = 0): both
    // are produced by the pass that writes the iterate, saving a pass over the nodes.
    let mut share: Vec<f64> = x.iter().zip(&inv_out).map(|(p, w)| p * w).collect();
    let mut next_share = vec![0.0; n];
    let mut dangling_mass: f64 = x
        .iter()
        .zip(&inv_out)
        .filter(|(_, w)| **w == 0.0)
        .map(|(p, _)| p)
        .sum();
    let mut tracker = TopOrderTracker::new(conv.top_k);
    let mut report = IterationReport::default();
    for iteration in 1..=conv.max_iter {
        // next_i = v_i·(1 − α + α·dangling) + α·Σ_{j→i} share_j
        let update =
            |start: usize, out: &mut [f64], out_share: &mut [f64], old: &[f64]| -> (f64, f64) {
                let (mut err, mut dangling) = (0.0, 0.0);
                for (k, (slot, slot_share)) in out.iter_mut().zip(out_share.iter_mut()).enumerate()
                {
                    let i = start + k;
                    let sum = sum_over(&in_sources[in_offsets[i]..in_offsets[i + 1]], &share);
                    let vi = teleport.as_ref().map_or(1.0 / n as f64, |t| t[i]);
                    let value = vi * (1.0 - alpha + alpha * dangling_mass) + alpha * sum;
                    err += (value - old[k]).abs();
                    *slot = value;
                    *slot_share = value * inv_out[i];
                    if inv_out[i] == 0.0 {
                        dangling += value;
                    }
                }
                (err, dangling)
            };
        let (err, dangling) = if parallel {
            next.par_chunks_mut(CHUNK)
                .zip(next_share.par_chunks_mut(CHUNK))
                .zip(x.par_chunks(CHUNK))
                .enumerate()
                .map(|(c, ((out, out_share), old))| update(c * CHUNK, out, out_share, old))
                .reduce(|| (0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1))
        } else {
            update(0, &mut next, &mut next_share, &x)
        };
        dangling_mass = dangling;
        std::mem::swap(&mut share, &mut next_share);
        std::mem::swap(&mut x, &mut next);
        if conv.finished_iteration(
            &mut report,
            &mut tracker,
            iteration,
            &x,
            error_bound(alpha, err),
        ) {
            break;
        }
    }
    Ok((x, report))
}

/// The L1 distance to the fixed point after a step that changed the iterate by `change` (SPEC §2
/// "Convergence"): the map is a contraction with factor α in L1, so
/// `‖x_k − x*‖₁ ≤ α/(1−α)·‖x_k − x_{k−1}‖₁`. PageRank stops on this bound, not on the change
/// itself, which at α = 0.85 leaves an error up to 5.7× the tolerance.
pub fn error_bound(alpha: f64, change: f64) -> f64 {
    alpha / (1.0 - alpha) * change
}

pub(crate) fn normalised_teleport(v: &[f64], n: usize) -> Result<Vec<f64>> {
    let bad = |message: String| GraphError::InvalidParameter {
        name: "teleport vector",
        message,
    };
    if v.len() != n {
        return Err(bad(format!("has {} entries for {n} nodes", v.len())));
    }
    if let Some(x) = v.iter().find(|x| !(x.is_finite() && **x >= 0.0)) {
        return Err(bad(format!(
            "entry {x} is not a finite non-negative number"
        )));
    }
    let total: f64 = v.iter().sum();
    if !(total > 0.0 && total.is_finite()) {
        return Err(bad(format!("sums to {total}; it needs positive mass")));
    }
    Ok(v.iter().map(|x| x / total).collect())
}

/// Topic-sensitive PageRank (eq. 5.9): one personalized vector per topic, teleporting
/// uniformly over the topic's documents.
pub fn topic_sensitive(
    g: &Csr,
    topics: &[Vec<u32>],
    params: &PageRankParams,
) -> Result<Vec<Vec<f64>>> {
    topics
        .iter()
        .map(|docs| {
            let p = params.clone().teleport_to(g.n(), docs)?;
            Ok(pagerank(g, &p)?.0)
        })
        .collect()
}

/// Query-time combination of topic vectors: `Σ_t w_t · P_t` with the weights normalised to 1.
pub fn combine_topics(vectors: &[Vec<f64>], weights: &[f64]) -> Result<Vec<f64>> {
    let bad = |message: String| GraphError::InvalidParameter {
        name: "topic weights",
        message,
    };
    if vectors.len() != weights.len() {
        return Err(bad(format!(
            "{} weights for {} topics",
            weights.len(),
            vectors.len()
        )));
    }
    if weights.iter().any(|w| !(w.is_finite() && *w >= 0.0)) {
        return Err(bad("weights must be finite and non-negative".into()));
    }
    let total: f64 = weights.iter().sum();
    if total <= 0.0 {
        return Err(bad("weights must not all be zero".into()));
    }
    let n = vectors.first().map_or(0, Vec::len);
    let mut out = vec![0.0; n];
    for (v, w) in vectors.iter().zip(weights) {
        if v.len() != n {
            return Err(bad("topic vectors differ in length".into()));
        }
        for (o, x) in out.iter_mut().zip(v) {
            *o += w / total * x;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::testutil::{assert_close, dense_pagerank, random_graph};

    fn exact() -> PageRankParams {
        PageRankParams {
            convergence: Convergence {
                tol_per_node: 1e-15,
                max_iter: 10_000,
                ..Convergence::default()
            },
            ..PageRankParams::default()
        }
    }

    #[test]
    fn langville_meyer_example() {
        let edges = [
            (1, 2),
            (1, 3),
            (3, 1),
            (3, 2),
            (3, 5),
            (4, 5),
            (4, 6),
            (5, 4),
            (5, 6),
            (6, 4),
        ];
        let edges: Vec<_> = edges.iter().map(|&(s, t)| (s - 1, t - 1)).collect();
        let (g, _) = Csr::from_edges(6, &edges).unwrap();
        let (p, report) = pagerank(
            &g,
            &PageRankParams {
                damping: 0.9,
                ..exact()
            },
        )
        .unwrap();
        assert!(report.converged);
        let expected = [
            0.03721197, 0.05395735, 0.04150565, 0.37508082, 0.20599833, 0.28624589,
        ];
        assert_close(&p, &expected, 1e-8);
    }

    #[test]
    fn personalized_on_k4() {
        let edges: Vec<_> = (0..4u32)
            .flat_map(|s| (0..4u32).filter(move |&t| t != s).map(move |t| (s, t)))
            .collect();
        let (g, _) = Csr::from_edges(4, &edges).unwrap();
        let params = exact().teleport_to(4, &[3]).unwrap();
        let (p, _) = pagerank(&g, &params).unwrap();
        // The README's values are networkx's (tolerance 1e-6), so agree to 1e-6; by symmetry
        // the exact solution is x = 17/77 for nodes 0..2 and 26/77 for node 3.
        assert_close(
            &p,
            &[0.220779318, 0.220779318, 0.220779318, 0.337662045],
            1e-6,
        );
        let x = 17.0 / 77.0;
        assert_close(&p, &[x, x, x, 26.0 / 77.0], 1e-14);
    }

    #[test]
    fn matches_dense_linear_solve_on_random_graphs() {
        for seed in 0..20 {
            let g = random_graph(seed, 30, 0.08);
            let mut params = exact();
            if seed % 2 == 1 {
                params.teleport = Some((0..30).map(|i| (i % 7) as f64).collect());
            }
            let (p, _) = pagerank(&g, &params).unwrap();
            let oracle = dense_pagerank(&g, 0.85, params.teleport.as_deref());
            assert_close(&p, &oracle, 1e-10);
            assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn parallel_and_serial_agree_exactly() {
        let g = random_graph(4, 3000, 0.002);
        let serial = PageRankParams {
            parallel: Some(false),
            ..exact()
        };
        let parallel = PageRankParams {
            parallel: Some(true),
            ..exact()
        };
        assert_eq!(
            pagerank(&g, &serial).unwrap().0,
            pagerank(&g, &parallel).unwrap().0
        );
    }

    #[test]
    fn degenerate_graphs_give_defined_scores() {
        let (empty, _) = Csr::from_edges(0, &[]).unwrap();
        assert!(pagerank(&empty, &exact()).unwrap().0.is_empty());
        let (no_edges, _) = Csr::from_edges(5, &[]).unwrap();
        let (p, _) = pagerank(&no_edges, &exact()).unwrap();
        assert_close(&p, &[0.2; 5], 1e-15);
    }

    #[test]
    fn bad_parameters_are_errors() {
        let (g, _) = Csr::from_edges(3, &[(0, 1)]).unwrap();
        for params in [
            PageRankParams {
                damping: 1.0,
                ..exact()
            },
            PageRankParams {
                damping: f64::NAN,
                ..exact()
            },
            PageRankParams {
                teleport: Some(vec![1.0, 2.0]),
                ..exact()
            },
            PageRankParams {
                teleport: Some(vec![0.0; 3]),
                ..exact()
            },
            PageRankParams {
                teleport: Some(vec![1.0, f64::INFINITY, 0.0]),
                ..exact()
            },
        ] {
            assert!(pagerank(&g, &params).is_err());
        }
        let err = exact().teleport_to(3, &[7]).unwrap_err();
        assert!(err.to_string().contains("node 7 does not exist"), "{err}");
    }

    #[test]
    fn topic_vectors_combine_linearly() {
        let g = random_graph(3, 25, 0.1);
        let topics = vec![vec![0, 1, 2], vec![10]];
        let vs = topic_sensitive(&g, &topics, &exact()).unwrap();
        let mixed = combine_topics(&vs, &[3.0, 1.0]).unwrap();
        for i in 0..25 {
            assert!((mixed[i] - (0.75 * vs[0][i] + 0.25 * vs[1][i])).abs() < 1e-15);
        }
        assert!(combine_topics(&vs, &[0.0, 0.0]).is_err());
        assert!(topic_sensitive(&g, &[vec![]], &exact()).is_err());
    }
}
