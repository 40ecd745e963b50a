//! HITS hubs and authorities (SPEC §2.2, book §5.6 eq. 5.13, Kleinberg 1999):
//! `a(u) = Σ_{v→u} h(v)`, `h(u) = Σ_{u→v} a(v)`, normalised each iteration. Scores are returned
//! normalised to sum 1 (the networkx convention). Global HITS is a static feature; the
//! query-dependent form runs on the base set of a root set under a time budget.

use std::time::Instant;

use super::base_set::base_set;
use super::convergence::{Convergence, IterationReport, TopOrderTracker};
use super::csr::{gather_sum, PARALLEL_MIN_EDGES};
use super::{Csr, Result};

/// Hub and authority score of every node (each vector sums to 1).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HubAuthority {
    pub hub: Vec<f64>,
    pub authority: Vec<f64>,
}

/// Scores on a query's base set: entry i belongs to graph node `nodes[i]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LocalScores {
    pub nodes: Vec<u32>,
    pub scores: HubAuthority,
    pub report: IterationReport,
}

/// Power iteration from uniform hubs. The L1 change of hubs plus authorities is compared with
/// the tolerance. Without any edge every score is 1/N (a defined, uniform result). If
/// `deadline` passes, the current normalised iterate is returned with `timed_out` set.
pub fn hits(
    g: &Csr,
    convergence: &Convergence,
    deadline: Option<Instant>,
) -> Result<(HubAuthority, IterationReport)> {
    convergence.check()?;
    let n = g.n();
    let mut report = IterationReport::default();
    if n == 0 {
        return Ok((HubAuthority::default(), report));
    }
    let uniform = vec![1.0 / n as f64; n];
    if g.m() == 0 {
        let s = HubAuthority {
            hub: uniform.clone(),
            authority: uniform,
        };
        return Ok((
            s,
            IterationReport {
                converged: true,
                ..report
            },
        ));
    }
    let parallel = g.m() >= PARALLEL_MIN_EDGES;
    let (in_off, in_src) = g.in_adjacency();
    let (out_off, out_dst) = g.out_adjacency();
    let mut hub = uniform.clone();
    let mut authority = uniform;
    let mut next_a = vec![0.0; n];
    let mut next_h = vec![0.0; n];
    let mut tracker = TopOrderTracker::new(convergence.top_k);
    for iteration in 1..=convergence.max_iter {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            report.timed_out = true;
            break;
        }
        gather_sum(in_off, in_src, &hub, &mut next_a, parallel);
        normalise(&mut next_a);
        gather_sum(out_off, out_dst, &next_a, &mut next_h, parallel);
        normalise(&mut next_h);
        let err = l1(&next_a, &authority) + l1(&next_h, &hub);
        std::mem::swap(&mut authority, &mut next_a);
        std::mem::swap(&mut hub, &mut next_h);
        if convergence.finished_iteration(&mut report, &mut tracker, iteration, &authority, err) {
            break;
        }
    }
    Ok((HubAuthority { hub, authority }, report))
}

/// Query-dependent HITS (the original algorithm): HITS on the subgraph induced by the base set
/// of `root` with in-link cap `in_cap`, stopping at `deadline`.
pub fn query_hits(
    g: &Csr,
    root: &[u32],
    in_cap: usize,
    convergence: &Convergence,
    deadline: Option<Instant>,
) -> Result<LocalScores> {
    let nodes = base_set(g, root, in_cap)?;
    let sub = g.induced(&nodes)?;
    let (scores, report) = hits(&sub, convergence, deadline)?;
    Ok(LocalScores {
        nodes,
        scores,
        report,
    })
}

/// Scales to sum 1; an all-zero vector stays zero (nodes without in- or out-links).
pub(crate) fn normalise(x: &mut [f64]) {
    let total: f64 = x.iter().sum();
    if total > 0.0 {
        x.iter_mut().for_each(|v| *v /= total);
    }
}

pub(crate) fn l1(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::testutil::{assert_close, random_graph};

    fn tight() -> Convergence {
        Convergence {
            tol_per_node: 1e-15,
            max_iter: 10_000,
            ..Convergence::default()
        }
    }

    #[test]
    fn literature_example() {
        let edges = [(1, 3), (1, 5), (2, 1), (3, 5), (5, 4), (5, 3), (6, 5)];
        let edges: Vec<_> = edges.iter().map(|&(s, t)| (s - 1, t - 1)).collect();
        let (g, _) = Csr::from_edges(6, &edges).unwrap();
        let (s, report) = hits(&g, &tight(), None).unwrap();
        assert!(report.converged);
        assert_close(
            &s.authority,
            &[0.0, 0.0, 0.366025, 0.133975, 0.5, 0.0],
            5e-7,
        );
        assert_close(
            &s.hub,
            &[0.366025, 0.0, 0.211325, 0.0, 0.211325, 0.211325],
            5e-7,
        );
    }

    /// Oracle: the authority vector must be an eigenvector of AᵀA (`AᵀA a = λ a`, with
    /// λ = Σ AᵀA a as Σ a = 1). That it is the principal one is checked against networkx's SVD
    /// in `bench/graph_crosscheck.py`.
    #[test]
    fn fixed_point_on_random_graphs() {
        for seed in 0..10 {
            let g = random_graph(seed, 40, 0.1);
            let (s, _) = hits(&g, &tight(), None).unwrap();
            let n = g.n();
            let mut ata = vec![0.0; n];
            for v in 0..n as u32 {
                let h: f64 = g.out(v).iter().map(|&w| s.authority[w as usize]).sum();
                for &u in g.out(v) {
                    ata[u as usize] += h;
                }
            }
            let lambda: f64 = ata.iter().sum::<f64>();
            let residual: f64 = ata
                .iter()
                .zip(&s.authority)
                .map(|(x, a)| (x - lambda * a).abs())
                .sum();
            assert!(residual < 1e-9 * lambda, "seed {seed}: residual {residual}");
            assert!(s
                .authority
                .iter()
                .chain(&s.hub)
                .all(|x| x.is_finite() && *x >= 0.0));
        }
    }

    #[test]
    fn degenerate_graphs_and_deadline() {
        let (g, _) = Csr::from_edges(4, &[]).unwrap();
        let (s, _) = hits(&g, &tight(), None).unwrap();
        assert_eq!(s.authority, vec![0.25; 4]);
        let g = random_graph(1, 50, 0.1);
        let (_, r) = hits(&g, &tight(), Some(Instant::now())).unwrap();
        assert!(r.timed_out);
    }

    #[test]
    fn query_dependent_runs_on_the_base_set() {
        let edges = [(0, 1), (2, 1), (3, 4)];
        let (g, _) = Csr::from_edges(5, &edges).unwrap();
        let local = query_hits(&g, &[1], 50, &tight(), None).unwrap();
        assert_eq!(local.nodes, vec![1, 0, 2]);
        assert_close(&local.scores.authority, &[1.0, 0.0, 0.0], 1e-12);
        assert_close(&local.scores.hub, &[0.0, 0.5, 0.5], 1e-12);
    }
}
