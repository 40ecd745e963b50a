//! TrustRank (SPEC §2.5, book §5.8, Gyöngyi, Garcia-Molina & Pedersen 2004).
//!
//! 1. Seed candidates: pages ranked by **inverse PageRank** (PageRank on the reversed graph —
//!    pages from which much of the graph is reachable), top L offered to an operator.
//! 2. The operator's good seeds are the teleport set of a personalized PageRank: trust flows
//!    out from the seeds and fades with link distance (α_B = 0.85, M_B = 20 iterations).
//! 3. Spam mass `(PageRank − c·TrustRank) / PageRank`: the share of a page's PageRank that
//!    does not come from the trusted core. `c` rescales trust to PageRank's units; the default
//!    `|seeds|/N` is the share of the teleport mass the seeds get in plain PageRank.
//!
//! Anti-TrustRank propagates distrust from known spam pages along reversed links (pages that
//! link to spam are suspicious).

use super::convergence::{top_k, Convergence, IterationReport};
use super::pagerank::{pagerank, PageRankParams};
use super::{Csr, GraphError, Result};

/// SPEC §2.5 default number of seed candidates offered.
pub const DEFAULT_CANDIDATES: usize = 100;

/// α_B and M_B from the paper (SPEC §2.5).
pub fn default_params() -> PageRankParams {
    PageRankParams {
        damping: 0.85,
        teleport: None,
        convergence: Convergence::fixed(20),
        parallel: None,
    }
}

/// Inverse PageRank of every node (PageRank of the reversed graph).
pub fn inverse_pagerank(g: &Csr, params: &PageRankParams) -> Result<(Vec<f64>, IterationReport)> {
    pagerank(&g.reversed(), params)
}

/// The top `l` seed candidates by inverse PageRank, best first.
pub fn seed_candidates(inverse_pagerank: &[f64], l: usize) -> Vec<u32> {
    top_k(inverse_pagerank, l)
}

/// Trust scores (sum 1) from the good `seeds`. `params.teleport` is ignored: the teleport
/// vector is uniform over the seeds. Errors on no seeds or a seed that is not a node.
pub fn trustrank(
    g: &Csr,
    seeds: &[u32],
    params: &PageRankParams,
) -> Result<(Vec<f64>, IterationReport)> {
    if seeds.is_empty() {
        return Err(GraphError::InvalidParameter {
            name: "TrustRank seeds",
            message: "at least one trusted seed is needed".into(),
        });
    }
    let p = params.clone().teleport_to(g.n(), seeds)?;
    pagerank(g, &p)
}

/// Distrust scores (sum 1) from known spam `seeds`, propagated backwards along links.
pub fn anti_trustrank(
    g: &Csr,
    spam_seeds: &[u32],
    params: &PageRankParams,
) -> Result<(Vec<f64>, IterationReport)> {
    trustrank(&g.reversed(), spam_seeds, params)
}

/// Relative spam mass per node, `(p − c·t)/p`. PageRank with a positive teleport share is
/// positive everywhere; a zero PageRank (only possible with a degenerate teleport vector) gives
/// spam mass 0 rather than a NaN.
pub fn spam_mass(pagerank: &[f64], trust: &[f64], c: f64) -> Result<Vec<f64>> {
    if pagerank.len() != trust.len() {
        return Err(GraphError::InvalidParameter {
            name: "spam mass inputs",
            message: format!(
                "{} PageRank vs {} trust scores",
                pagerank.len(),
                trust.len()
            ),
        });
    }
    if !(c.is_finite() && c >= 0.0) {
        return Err(GraphError::InvalidParameter {
            name: "spam mass scale c",
            message: format!("{c} is not finite and non-negative"),
        });
    }
    Ok(pagerank
        .iter()
        .zip(trust)
        .map(|(&p, &t)| if p > 0.0 { (p - c * t) / p } else { 0.0 })
        .collect())
}

/// The default trust scale `c = |seeds| / N`.
pub fn default_scale(seeds: usize, n: usize) -> f64 {
    if n == 0 {
        0.0
    } else {
        seeds as f64 / n as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::testutil::{assert_close, dense_pagerank, random_graph};

    #[test]
    fn trust_is_personalized_pagerank_over_seeds() {
        let g = random_graph(5, 40, 0.08);
        let seeds = [3u32, 9, 20];
        let mut teleport = vec![0.0; 40];
        seeds.iter().for_each(|&s| teleport[s as usize] = 1.0);
        let exact = PageRankParams {
            convergence: Convergence {
                tol_per_node: 1e-15,
                max_iter: 5000,
                ..Convergence::default()
            },
            ..default_params()
        };
        let (t, _) = trustrank(&g, &seeds, &exact).unwrap();
        assert_close(&t, &dense_pagerank(&g, 0.85, Some(&teleport)), 1e-10);
        let (t20, r) = trustrank(&g, &seeds, &default_params()).unwrap();
        assert_eq!(r.iterations, 20);
        assert!(t20.iter().zip(&t).map(|(a, b)| (a - b).abs()).sum::<f64>() < 1e-2);
    }

    #[test]
    fn inverse_pagerank_and_distrust_use_reversed_links() {
        // A chain 0 → 1 → 2: inverse PageRank favours the head of the chain.
        let (g, _) = Csr::from_edges(3, &[(0, 1), (1, 2)]).unwrap();
        let (inv, _) = inverse_pagerank(&g, &PageRankParams::default()).unwrap();
        assert_eq!(seed_candidates(&inv, 2), vec![0, 1]);
        let (reversed_pr, _) = pagerank(&g.reversed(), &PageRankParams::default()).unwrap();
        assert_eq!(inv, reversed_pr);
        // Distrust from spam page 2 reaches its in-linker 1, not 0 directly.
        let (d, _) = anti_trustrank(&g, &[2], &default_params()).unwrap();
        assert!(d[2] > d[1] && d[1] > d[0]);
    }

    #[test]
    fn spam_mass_and_bad_seeds() {
        let m = spam_mass(&[0.5, 0.25, 0.0], &[0.5, 0.0, 0.3], 0.5).unwrap();
        assert_eq!(m, vec![0.5, 1.0, 0.0]);
        assert!(spam_mass(&[0.5], &[], 1.0).is_err());
        let (g, _) = Csr::from_edges(3, &[(0, 1)]).unwrap();
        let err = trustrank(&g, &[5], &default_params()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "node 5 does not exist (the graph has 3 nodes)"
        );
        assert!(trustrank(&g, &[], &default_params()).is_err());
    }
}
