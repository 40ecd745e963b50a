//! Link features: the stored global scores (SPEC §2) of each candidate, and HITS / SALSA on
//! the subgraph the candidate window induces (the query-dependent variants of SPEC §2.2–2.3
//! restricted to the candidates, which costs microseconds instead of a base-set expansion).

use super::set::{LINK_LOG_SCORES, LOG_SCORE_FLOOR};
use super::{FeatureMatrix, FeatureSet};
use crate::graph::convergence::Convergence;
use crate::graph::{hits, salsa};
use crate::links::LinkData;

/// HITS on a window of at most 1000 nodes converges well within this many iterations.
const WINDOW_HITS_ITERATIONS: usize = 50;

/// `nodes[row]` is the graph node of candidate `row`, if it is in the graph. `window`: the
/// graph nodes of the whole window when the candidates are only part of it (one shard's
/// rows of a sharded window); `None`: the candidates are the window.
pub(super) fn extract(
    links: &LinkData,
    set: &FeatureSet,
    nodes: &[Option<u32>],
    window_nodes: Option<&[u32]>,
    m: &mut FeatureMatrix,
) {
    let s = &links.scores;
    let n = s.n() as f64;
    let log_score = |x: f64| -> f32 { ((1e-3 + x * n).ln() as f32).max(LOG_SCORE_FLOOR) };
    let log_cols: Vec<usize> = LINK_LOG_SCORES.iter().map(|f| set.col(f)).collect();
    let (in_graph, spam, in_deg, out_deg) = (
        set.col("link.in_graph"),
        set.col("link.spam_mass"),
        set.col("link.in_degree"),
        set.col("link.out_degree"),
    );
    let mut in_window: Vec<(usize, u32)> = Vec::new();
    for (row, node) in nodes.iter().enumerate() {
        let Some(node) = *node else {
            continue;
        };
        in_window.push((row, node));
        let i = node as usize;
        let values = [
            s.pagerank[i],
            s.inverse_pagerank[i],
            s.trustrank[i],
            s.anti_trustrank[i],
            s.hits_hub[i],
            s.hits_authority[i],
            s.salsa_hub[i],
            s.salsa_authority[i],
        ];
        for (&col, v) in log_cols.iter().zip(values) {
            m.set(row, col, log_score(v));
        }
        m.set(row, in_graph, 1.0);
        m.set(row, spam, s.spam_mass[i] as f32);
        m.set(row, in_deg, (1.0 + s.in_degree[i] as f32).ln());
        m.set(row, out_deg, (1.0 + s.out_degree[i] as f32).ln());
    }
    let all: Vec<u32> = match window_nodes {
        Some(w) => w.to_vec(),
        None => in_window.iter().map(|&(_, n)| n).collect(),
    };
    window(links, set, &in_window, &all, m);
}

/// HITS and SALSA on the candidates' induced subgraph, scaled by the window size so that a
/// uniform score is 1 whatever the window.
/// `nodes` are the rows to fill and their nodes; `all` the window's nodes (a superset).
fn window(
    links: &LinkData,
    set: &FeatureSet,
    nodes: &[(usize, u32)],
    all: &[u32],
    m: &mut FeatureMatrix,
) {
    if nodes.is_empty() {
        return;
    }
    let mut ids: Vec<u32> = all.to_vec();
    ids.sort_unstable();
    ids.dedup();
    let Ok(sub) = links.graph.induced(&ids) else {
        return;
    };
    let local = |node: u32| ids.binary_search(&node).expect("node is in the window");
    let size = ids.len() as f32;
    let convergence = Convergence {
        tol_per_node: 1e-9,
        max_iter: WINDOW_HITS_ITERATIONS,
        top_k: 0,
        stop_when_top_stable_for: None,
    };
    let hits = hits::hits(&sub, &convergence, None).ok().map(|(h, _)| h);
    let salsa = salsa::salsa(&sub);
    let cols = [
        set.col("window.hits_authority"),
        set.col("window.hits_hub"),
        set.col("window.salsa_authority"),
        set.col("window.in_links"),
    ];
    for &(row, node) in nodes {
        let i = local(node);
        if let Some(h) = &hits {
            m.set(row, cols[0], h.authority[i] as f32 * size);
            m.set(row, cols[1], h.hub[i] as f32 * size);
        }
        m.set(row, cols[2], salsa.authority[i] as f32 * size);
        m.set(row, cols[3], sub.in_degree(i as u32) as f32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::LinkScores;

    /// Five documents, four in the graph: a→b, a→c, b→c, c→a, d→c.
    fn links() -> LinkData {
        let keys: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
        let n = keys.len();
        let ramp = |k: f64| (0..n).map(|i| k * (i + 1) as f64).collect::<Vec<_>>();
        LinkData::new(LinkScores {
            keys,
            pagerank: vec![0.1, 0.2, 0.5, 0.2],
            inverse_pagerank: ramp(0.01),
            trustrank: vec![0.0, 0.3, 0.3, 0.4],
            spam_mass: vec![0.5, -0.25, 0.0, 1.0],
            anti_trustrank: ramp(0.02),
            hits_hub: ramp(0.03),
            hits_authority: ramp(0.04),
            salsa_hub: ramp(0.05),
            salsa_authority: ramp(0.06),
            in_degree: vec![1, 1, 3, 0],
            out_degree: vec![2, 1, 1, 1],
            out_offsets: vec![0, 2, 3, 4, 5],
            out_targets: vec![1, 2, 2, 0, 2],
            // Not read by these tests; one entry per node as loading requires.
            simrank: crate::graph::simrank::SimRankDiagonal {
                values: vec![0.2, 0.2, 0.5, 1.0],
                ..Default::default()
            },
            ..Default::default()
        })
        .unwrap()
    }

    /// Dense power iteration for HITS, the textbook way (a = Aᵀh, h = Aa, L1-normalised).
    fn dense_hits(adj: &[Vec<f64>]) -> (Vec<f64>, Vec<f64>) {
        let n = adj.len();
        let (mut h, mut a) = (vec![1.0 / n as f64; n], vec![0.0; n]);
        for _ in 0..500 {
            a = (0..n)
                .map(|j| (0..n).map(|i| adj[i][j] * h[i]).sum())
                .collect();
            let s: f64 = a.iter().sum();
            a.iter_mut().for_each(|x| *x /= s);
            h = (0..n)
                .map(|i| (0..n).map(|j| adj[i][j] * a[j]).sum())
                .collect();
            let s: f64 = h.iter().sum();
            h.iter_mut().for_each(|x| *x /= s);
        }
        (a, h)
    }

    #[test]
    fn global_and_window_scores() {
        let links = links();
        let set = FeatureSet::current();
        // Candidates c, x (not in the graph), a, b — d is outside the window.
        let ids = ["c", "x", "a", "b"];
        let mut m = FeatureMatrix {
            rows: 4,
            cols: set.len(),
            values: ids.iter().flat_map(|_| set.defaults().to_vec()).collect(),
        };
        let nodes: Vec<Option<u32>> = ids.iter().map(|id| links.node(id)).collect();
        extract(&links, set, &nodes, None, &mut m);
        let get = |row: usize, name: &str| m.row(row)[set.col(name)];
        // Global scores, log-scaled by N = 4.
        assert!((get(0, "link.pagerank") - (1e-3f64 + 0.5 * 4.0).ln() as f32).abs() < 1e-6);
        assert_eq!(get(0, "link.in_degree"), 4f32.ln());
        assert_eq!(get(2, "link.spam_mass"), 0.5);
        assert_eq!(get(2, "link.in_graph"), 1.0);
        // Outside the graph: the declared defaults.
        assert_eq!(get(1, "link.in_graph"), 0.0);
        assert_eq!(get(1, "link.pagerank"), LOG_SCORE_FLOOR);
        assert_eq!(get(1, "window.hits_authority"), 0.0);
        // Window = {a, b, c} with edges a→b, a→c, b→c, c→a (d→c is outside).
        let adj = vec![
            vec![0.0, 1.0, 1.0],
            vec![0.0, 0.0, 1.0],
            vec![1.0, 0.0, 0.0],
        ];
        let (a, h) = dense_hits(&adj);
        for (row, local) in [(2usize, 0usize), (3, 1), (0, 2)] {
            let want_a = (a[local] * 3.0) as f32;
            let want_h = (h[local] * 3.0) as f32;
            assert!((get(row, "window.hits_authority") - want_a).abs() < 1e-4);
            assert!((get(row, "window.hits_hub") - want_h).abs() < 1e-4);
        }
        // SALSA closed form (Lempel & Moran): the bipartite hub/authority graph has two
        // components, {a→b, a→c, b→c} holding authorities b, c and {c→a} holding a; an
        // authority gets |A_C|/|A| · indeg/|E_C|, times the window size 3.
        assert!((get(2, "window.salsa_authority") - 1.0).abs() < 1e-6);
        assert!((get(3, "window.salsa_authority") - 2.0 / 3.0).abs() < 1e-6);
        assert!((get(0, "window.salsa_authority") - 4.0 / 3.0).abs() < 1e-6);
        assert_eq!(get(0, "window.in_links"), 2.0);
    }
}
