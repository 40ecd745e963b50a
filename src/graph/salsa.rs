//! SALSA (SPEC §2.3, book §5.7, Lempel & Moran 2001). Each link u→v joins the hub copy of u to
//! the authority copy of v. The authority chain steps from an authority back along a random
//! in-link to a hub, then forward along a random out-link of that hub; the hub chain the other
//! way round. The stationary distributions have a closed form per connected component C of the
//! bipartite graph:
//! ```text
//! authority(v) = (|A_C| / |A|) · indeg(v) / |E_C|      hub(u) = (|H_C| / |H|) · outdeg(u) / |E_C|
//! ```
//! [`salsa`] evaluates it in O(n + m); [`salsa_iterative`] runs the two chains from uniform
//! starts (the check on the closed form, and the form to use if weights are ever added).

use std::time::Instant;

use petgraph::unionfind::UnionFind;

use super::base_set::base_set;
use super::convergence::{Convergence, IterationReport, TopOrderTracker};
use super::csr::{gather_sum, PARALLEL_MIN_EDGES};
use super::hits::{l1, HubAuthority, LocalScores};
use super::{Csr, Result};

/// The closed form. Nodes without in-links have authority 0, without out-links hub 0; without
/// any edge every score is 1/N (uniform, like HITS).
pub fn salsa(g: &Csr) -> HubAuthority {
    let n = g.n();
    if g.m() == 0 {
        let uniform = vec![if n == 0 { 0.0 } else { 1.0 / n as f64 }; n];
        return HubAuthority {
            hub: uniform.clone(),
            authority: uniform,
        };
    }
    // Element u is u's hub copy, n + v is v's authority copy.
    let mut uf = UnionFind::<u32>::new(2 * n);
    for (u, v) in g.edges() {
        uf.union(u, n as u32 + v);
    }
    let mut a_count = vec![0usize; 2 * n];
    let mut h_count = vec![0usize; 2 * n];
    let mut e_count = vec![0usize; 2 * n];
    let (mut a_total, mut h_total) = (0usize, 0usize);
    for u in 0..n as u32 {
        let (indeg, outdeg) = (g.in_degree(u), g.out_degree(u));
        if outdeg > 0 {
            let c = uf.find(u) as usize;
            h_count[c] += 1;
            e_count[c] += outdeg;
            h_total += 1;
        }
        if indeg > 0 {
            a_count[uf.find(n as u32 + u) as usize] += 1;
            a_total += 1;
        }
    }
    let mut hub = vec![0.0; n];
    let mut authority = vec![0.0; n];
    for u in 0..n as u32 {
        let (indeg, outdeg) = (g.in_degree(u), g.out_degree(u));
        if outdeg > 0 {
            let c = uf.find(u) as usize;
            hub[u as usize] =
                h_count[c] as f64 / h_total as f64 * outdeg as f64 / e_count[c] as f64;
        }
        if indeg > 0 {
            let c = uf.find(n as u32 + u) as usize;
            authority[u as usize] =
                a_count[c] as f64 / a_total as f64 * indeg as f64 / e_count[c] as f64;
        }
    }
    HubAuthority { hub, authority }
}

/// The two random walks by power iteration, each from the uniform distribution over its side
/// (which is what makes the component weights |A_C|/|A| and |H_C|/|H|).
pub fn salsa_iterative(
    g: &Csr,
    convergence: &Convergence,
    deadline: Option<Instant>,
) -> Result<(HubAuthority, IterationReport)> {
    convergence.check()?;
    let n = g.n();
    if g.m() == 0 {
        return Ok((
            salsa(g),
            IterationReport {
                converged: true,
                ..IterationReport::default()
            },
        ));
    }
    let parallel = g.m() >= PARALLEL_MIN_EDGES;
    let inv_in = g.inv_in_degrees();
    let inv_out = g.inv_out_degrees();
    let start = |inv_deg: &[f64]| {
        let k = inv_deg.iter().filter(|&&x| x > 0.0).count() as f64;
        inv_deg
            .iter()
            .map(|&x| if x > 0.0 { 1.0 / k } else { 0.0 })
            .collect::<Vec<f64>>()
    };
    let (in_off, in_src) = g.in_adjacency();
    let (out_off, out_dst) = g.out_adjacency();
    let mut authority = start(&inv_in);
    let mut hub = start(&inv_out);
    let (mut scaled, mut mid, mut next_a, mut next_h) =
        (vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    let mut tracker = TopOrderTracker::new(convergence.top_k);
    let mut report = IterationReport::default();
    for iteration in 1..=convergence.max_iter {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            report.timed_out = true;
            break;
        }
        // Authority chain: a → (back along an in-link) hub mass → (forward) authority.
        scale(&authority, &inv_in, &mut scaled);
        gather_sum(out_off, out_dst, &scaled, &mut mid, parallel);
        scale(&mid, &inv_out, &mut scaled);
        gather_sum(in_off, in_src, &scaled, &mut next_a, parallel);
        // Hub chain: h → (forward along an out-link) authority mass → (back) hub.
        scale(&hub, &inv_out, &mut scaled);
        gather_sum(in_off, in_src, &scaled, &mut mid, parallel);
        scale(&mid, &inv_in, &mut scaled);
        gather_sum(out_off, out_dst, &scaled, &mut next_h, parallel);
        let err = l1(&next_a, &authority) + l1(&next_h, &hub);
        std::mem::swap(&mut authority, &mut next_a);
        std::mem::swap(&mut hub, &mut next_h);
        if convergence.finished_iteration(&mut report, &mut tracker, iteration, &authority, err) {
            break;
        }
    }
    Ok((HubAuthority { hub, authority }, report))
}

fn scale(x: &[f64], w: &[f64], out: &mut [f64]) {
    for ((o, a), b) in out.iter_mut().zip(x).zip(w) {
        *o = a * b;
    }
}

/// Query-dependent SALSA: the closed form on the subgraph induced by the base set of `root`.
pub fn query_salsa(g: &Csr, root: &[u32], in_cap: usize) -> Result<LocalScores> {
    let nodes = base_set(g, root, in_cap)?;
    let sub = g.induced(&nodes)?;
    Ok(LocalScores {
        nodes,
        scores: salsa(&sub),
        report: IterationReport {
            converged: true,
            ..IterationReport::default()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::testutil::{assert_close, random_graph};

    #[test]
    fn closed_form_equals_power_iteration_on_random_graphs() {
        let tight = Convergence {
            tol_per_node: 1e-14,
            max_iter: 100_000,
            ..Convergence::default()
        };
        // Sparse graphs, so that there are many bipartite components of different sizes.
        for seed in 0..30 {
            let g = random_graph(seed, 60, 0.012 + 0.002 * (seed % 10) as f64);
            let closed = salsa(&g);
            let (iterated, report) = salsa_iterative(&g, &tight, None).unwrap();
            assert!(report.converged, "seed {seed}");
            assert_close(&iterated.authority, &closed.authority, 1e-9);
            assert_close(&iterated.hub, &closed.hub, 1e-9);
            assert!((closed.authority.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn hand_computed_components() {
        // Component 1: 0→2, 1→2, 1→3 (A_C = {2,3}, H_C = {0,1}, E_C = 3);
        // component 2: 4→5 (A_C = {5}, H_C = {4}, E_C = 1). |A| = 3, |H| = 3.
        let (g, _) = Csr::from_edges(6, &[(0, 2), (1, 2), (1, 3), (4, 5)]).unwrap();
        let s = salsa(&g);
        let third = 1.0 / 3.0;
        assert_close(
            &s.authority,
            &[0.0, 0.0, 2.0 / 3.0 * 2.0 / 3.0, 2.0 / 3.0 / 3.0, 0.0, third],
            1e-15,
        );
        assert_close(
            &s.hub,
            &[2.0 / 3.0 / 3.0, 2.0 / 3.0 * 2.0 / 3.0, 0.0, 0.0, third, 0.0],
            1e-15,
        );
    }

    #[test]
    fn degenerate_and_query_dependent() {
        let (g, _) = Csr::from_edges(3, &[]).unwrap();
        assert_eq!(salsa(&g).hub, vec![1.0 / 3.0; 3]);
        assert!(salsa(&Csr::from_edges(0, &[]).unwrap().0).hub.is_empty());
        let (g, _) = Csr::from_edges(5, &[(0, 1), (2, 1), (3, 4)]).unwrap();
        let local = query_salsa(&g, &[1], 50).unwrap();
        assert_eq!(local.nodes, vec![1, 0, 2]);
        assert_close(&local.scores.authority, &[1.0, 0.0, 0.0], 1e-15);
        assert!(query_salsa(&g, &[7], 50).is_err());
    }
}
