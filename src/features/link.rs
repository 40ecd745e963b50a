//! Link features: the stored global scores (SPEC §2) of each candidate, and HITS / SALSA on
//! the subgraph the candidate window induces (the query-dependent variants of SPEC §2.2–2.3
//! restricted to the candidates, which costs microseconds instead of a base-set expansion).
//!
//! The window's subgraph is built from its nodes' out-links, not by inducing it from the
//! whole graph: a cluster's leaves hold only their own documents'
//! scores and out-links ([`crate::graph::LinkScores::part`]), so a window spread over shards
//! gets its edges from every shard ([`LinkData::window_links`]) and its columns where it is
//! whole, at the root ([`window_columns`]). The edge set is the induced subgraph's, and [`Csr::from_edges`]
//! orders it, so the columns are the same floats either way.

use super::set::{LINK_LOG_SCORES, LOG_SCORE_FLOOR};
use super::{FeatureMatrix, FeatureSet};
use crate::graph::convergence::Convergence;
use crate::graph::{hits, salsa, Csr};
use crate::links::LinkData;

/// HITS on a window of at most 1000 nodes converges well within this many iterations.
const WINDOW_HITS_ITERATIONS: usize = 50;

/// `nodes[row]` is the node (an entry of `links.scores`) of candidate `row`, if it is in the
/// graph. `whole_window`: the candidates are the whole window, so the window columns are
/// filled here too; otherwise (one shard's rows of a sharded window) they are left to
/// [`window_columns`] where the window is whole.
pub(super) fn extract(
    links: &LinkData,
    set: &FeatureSet,
    nodes: &[Option<u32>],
    whole_window: bool,
    m: &mut FeatureMatrix,
) {
    let s = &links.scores;
    let n = s.total_nodes() as f64;
    let log_score = |x: f64| -> f32 { ((1e-3 + x * n).ln() as f32).max(LOG_SCORE_FLOOR) };
    let log_cols: Vec<usize> = LINK_LOG_SCORES.iter().map(|f| set.col(f)).collect();
    let (in_graph, spam, in_deg, out_deg) = (
        set.col("link.in_graph"),
        set.col("link.spam_mass"),
        set.col("link.in_degree"),
        set.col("link.out_degree"),
    );
    for (row, node) in nodes.iter().enumerate() {
        let Some(node) = *node else {
            continue;
        };
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
    if whole_window {
        let rows: Vec<(usize, u32, &[u32])> = nodes
            .iter()
            .enumerate()
            .filter_map(|(row, node)| node.map(|u| (row, s.global(u), s.out_links(u))))
            .collect();
        window_columns(set, &rows, m);
    }
}

/// A window's graph nodes, ascending and distinct: what [`window_columns`] computes on, and
/// what a root sends its leaves to filter their documents' out-links with.
pub(crate) fn window_nodes(nodes: impl IntoIterator<Item = u32>) -> Vec<u32> {
    let mut ids: Vec<u32> = nodes.into_iter().collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// HITS and SALSA on a window's link subgraph, scaled by the window size so that a uniform
/// score is 1 whatever the window, and each node's in-links within the window. `rows`: each
/// row of the window that is in the graph, with its whole-graph node and that node's
/// out-links (whole-graph nodes; those leaving the window are ignored, so a leaf's filtered
/// list and the whole list give the same subgraph). The window is the rows' nodes
/// ([`window_nodes`]).
pub(crate) fn window_columns(
    set: &FeatureSet,
    rows: &[(usize, u32, &[u32])],
    m: &mut FeatureMatrix,
) {
    if rows.is_empty() {
        return;
    }
    let window = window_nodes(rows.iter().map(|&(_, u, _)| u));
    let local = |node: u32| window.binary_search(&node).ok();
    let local_edges: Vec<(u32, u32)> = rows
        .iter()
        .flat_map(|&(_, u, out)| out.iter().map(move |&v| (u, v)))
        .filter_map(|(u, v)| Some((local(u)? as u32, local(v)? as u32)))
        .collect();
    let Ok((sub, _)) = Csr::from_edges(window.len(), &local_edges) else {
        return;
    };
    let size = window.len() as f32;
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
    for &(row, node, _) in rows {
        let Some(i) = local(node) else {
            continue;
        };
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

    /// The graph split in two parts (a, c | b, d), as two shards hold it: each part fills
    /// its rows' scores, its documents' out-links within the window give the subgraph, and
    /// the window columns computed from them equal the whole graph's, bit for bit.
    #[test]
    fn parts_give_the_whole_graphs_rows() {
        let whole = links();
        let set = FeatureSet::current();
        let ids = ["c", "x", "a", "b", "d"];
        let matrix = || FeatureMatrix {
            rows: ids.len(),
            cols: set.len(),
            values: ids.iter().flat_map(|_| set.defaults().to_vec()).collect(),
        };
        let mut want = matrix();
        let nodes: Vec<Option<u32>> = ids.iter().map(|id| whole.node(id)).collect();
        extract(&whole, set, &nodes, true, &mut want);

        let parts =
            [[0u32, 2], [1, 3]].map(|n| LinkData::new(whole.scores.part(&n).unwrap()).unwrap());
        assert!(parts[0].whole().is_none() && whole.whole().is_some());
        let mut got = matrix();
        let mut rows = Vec::new();
        for part in &parts {
            let nodes: Vec<Option<u32>> = ids.iter().map(|id| part.node(id)).collect();
            extract(part, set, &nodes, false, &mut got);
            for (row, node) in nodes.iter().enumerate() {
                if let Some(u) = node {
                    rows.push((row, *u, part));
                }
            }
        }
        let window = window_nodes(rows.iter().map(|&(_, u, p)| p.scores.global(u)));
        assert_eq!(window, [0, 1, 2, 3]);
        // What each shard sends: its documents' out-links within the window.
        let sent: Vec<Vec<u32>> = rows
            .iter()
            .map(|&(_, u, p)| p.window_links(u, &window))
            .collect();
        let rows: Vec<(usize, u32, &[u32])> = rows
            .iter()
            .zip(&sent)
            .map(|(&(r, u, p), out)| (r, p.scores.global(u), out.as_slice()))
            .collect();
        window_columns(set, &rows, &mut got);
        let bits = |m: &FeatureMatrix| m.values.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want));
        // The pagerank column is scaled by the whole graph's N = 4, not the part's 2.
        assert_eq!(parts[0].scores.total_nodes(), 4);
        assert!(want.row(4)[set.col("window.in_links")] == 0.0);
        assert!(want.row(0)[set.col("window.in_links")] == 3.0);
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
        extract(&links, set, &nodes, true, &mut m);
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
