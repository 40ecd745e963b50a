//! Compressed sparse row layout of a directed graph (SPEC §2): the form the iterative
//! algorithms read. Both directions are kept because PageRank pulls along in-links while HITS,
//! SALSA and the base-set expansion also walk out-links.

use super::{GraphError, Result};

/// A directed simple graph on nodes `0..n`: no self-loops, no duplicate edges, neighbour lists
/// sorted by id. Immutable once built.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Csr {
    out_offsets: Vec<usize>,
    out_targets: Vec<u32>,
    in_offsets: Vec<usize>,
    in_sources: Vec<u32>,
}

/// What [`Csr::from_edges`] removed to make the graph simple.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EdgeCleanup {
    pub self_loops: usize,
    pub duplicates: usize,
}

impl Csr {
    /// Builds the graph on `n` nodes from `(source, target)` pairs. Self-loops and repeated
    /// edges are dropped (SPEC §2: "duplicate links count once", "self-links are dropped").
    pub fn from_edges(n: usize, edges: &[(u32, u32)]) -> Result<(Csr, EdgeCleanup)> {
        if n > u32::MAX as usize {
            return Err(GraphError::TooLarge {
                what: "a graph",
                n,
                limit: u32::MAX as usize,
            });
        }
        let mut cleanup = EdgeCleanup::default();
        let mut kept: Vec<(u32, u32)> = Vec::with_capacity(edges.len());
        for &(s, t) in edges {
            for id in [s, t] {
                if id as usize >= n {
                    return Err(GraphError::NodeOutOfRange { id: id as u64, n });
                }
            }
            if s == t {
                cleanup.self_loops += 1;
            } else {
                kept.push((s, t));
            }
        }
        kept.sort_unstable();
        let before = kept.len();
        kept.dedup();
        cleanup.duplicates = before - kept.len();

        let (out_offsets, out_targets) = group(n, kept.iter().copied());
        let mut reversed: Vec<(u32, u32)> = kept.iter().map(|&(s, t)| (t, s)).collect();
        reversed.sort_unstable();
        let (in_offsets, in_sources) = group(n, reversed.into_iter());
        Ok((
            Csr {
                out_offsets,
                out_targets,
                in_offsets,
                in_sources,
            },
            cleanup,
        ))
    }

    /// Rebuilds a graph from its out-adjacency (as stored in a sidecar file), validating it.
    pub fn from_out_adjacency(offsets: Vec<usize>, targets: Vec<u32>) -> Result<Csr> {
        let bad = |message: String| GraphError::InvalidParameter {
            name: "adjacency",
            message,
        };
        if offsets.first() != Some(&0) || offsets.last() != Some(&targets.len()) {
            return Err(bad(
                "offsets must start at 0 and end at the edge count".into()
            ));
        }
        if offsets.windows(2).any(|w| w[0] > w[1]) {
            return Err(bad("offsets must not decrease".into()));
        }
        let n = offsets.len() - 1;
        let mut edges = Vec::with_capacity(targets.len());
        for u in 0..n {
            for &v in &targets[offsets[u]..offsets[u + 1]] {
                edges.push((u as u32, v));
            }
        }
        let (csr, cleanup) = Csr::from_edges(n, &edges)?;
        if cleanup != EdgeCleanup::default() {
            return Err(bad("self-loops or duplicate edges".into()));
        }
        Ok(csr)
    }

    /// Number of nodes.
    pub fn n(&self) -> usize {
        self.out_offsets.len().saturating_sub(1)
    }

    /// Number of edges.
    pub fn m(&self) -> usize {
        self.out_targets.len()
    }

    /// Targets of `u`'s out-links, ascending.
    pub fn out(&self, u: u32) -> &[u32] {
        let u = u as usize;
        &self.out_targets[self.out_offsets[u]..self.out_offsets[u + 1]]
    }

    /// Sources of `v`'s in-links, ascending.
    pub fn inn(&self, v: u32) -> &[u32] {
        let v = v as usize;
        &self.in_sources[self.in_offsets[v]..self.in_offsets[v + 1]]
    }

    pub fn out_degree(&self, u: u32) -> usize {
        self.out(u).len()
    }

    pub fn in_degree(&self, v: u32) -> usize {
        self.inn(v).len()
    }

    /// `1/out-degree` per node, 0 where it has no out-links (the share of a random surfer's
    /// mass each out-link carries).
    pub fn inv_out_degrees(&self) -> Vec<f64> {
        reciprocals(&self.out_offsets)
    }

    /// `1/in-degree` per node, 0 where it has no in-links.
    pub fn inv_in_degrees(&self) -> Vec<f64> {
        reciprocals(&self.in_offsets)
    }

    /// The out-adjacency arrays (offsets, targets), e.g. for storage.
    pub fn out_adjacency(&self) -> (&[usize], &[u32]) {
        (&self.out_offsets, &self.out_targets)
    }

    /// The in-adjacency arrays (offsets, sources): the pull side of PageRank's hot loop.
    pub fn in_adjacency(&self) -> (&[usize], &[u32]) {
        (&self.in_offsets, &self.in_sources)
    }

    /// The graph with every edge reversed (inverse PageRank, anti-TrustRank).
    pub fn reversed(&self) -> Csr {
        Csr {
            out_offsets: self.in_offsets.clone(),
            out_targets: self.in_sources.clone(),
            in_offsets: self.out_offsets.clone(),
            in_sources: self.out_targets.clone(),
        }
    }

    /// Every edge as `(source, target)`, sorted.
    pub fn edges(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        (0..self.n() as u32).flat_map(move |u| self.out(u).iter().map(move |&v| (u, v)))
    }

    /// The subgraph induced by `nodes` (distinct ids of this graph). Node `i` of the result is
    /// `nodes[i]`.
    pub fn induced(&self, nodes: &[u32]) -> Result<Csr> {
        super::check_nodes(nodes, self.n())?;
        let mut local = vec![u32::MAX; self.n()];
        for (i, &u) in nodes.iter().enumerate() {
            if local[u as usize] != u32::MAX {
                return Err(GraphError::InvalidParameter {
                    name: "node set",
                    message: format!("node {u} listed twice"),
                });
            }
            local[u as usize] = i as u32;
        }
        let mut edges = Vec::new();
        for (i, &u) in nodes.iter().enumerate() {
            for &v in self.out(u) {
                if local[v as usize] != u32::MAX {
                    edges.push((i as u32, local[v as usize]));
                }
            }
        }
        Ok(Csr::from_edges(nodes.len(), &edges)?.0)
    }
}

/// `1/(offsets[i+1] − offsets[i])` per node, 0 for an empty row.
fn reciprocals(offsets: &[usize]) -> Vec<f64> {
    offsets
        .windows(2)
        .map(|w| match w[1] - w[0] {
            0 => 0.0,
            d => 1.0 / d as f64,
        })
        .collect()
}

/// `out[i] = Σ_{j ∈ adj(i)} x[j]` for the adjacency `(offsets, adj)`: the sparse
/// matrix–vector product behind HITS and SALSA. Parallel over node chunks when `parallel`.
pub(crate) fn gather_sum(
    offsets: &[usize],
    adj: &[u32],
    x: &[f64],
    out: &mut [f64],
    parallel: bool,
) {
    use rayon::prelude::*;
    const CHUNK: usize = 1 << 12;
    let run = |start: usize, out: &mut [f64]| {
        for (k, slot) in out.iter_mut().enumerate() {
            let i = start + k;
            *slot = sum_over(&adj[offsets[i]..offsets[i + 1]], x);
        }
    };
    if parallel {
        out.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(c, chunk)| run(c * CHUNK, chunk));
    } else {
        run(0, out);
    }
}

/// `Σ_{j ∈ nodes} x[j]` with four independent partial sums. A single running sum makes every
/// edge wait for the previous addition (3–4 cycles of latency), which is what bound PageRank's
/// iteration on the Rust-docs graph, not memory traffic (docs/BENCHMARKS.md).
pub(crate) fn sum_over(nodes: &[u32], x: &[f64]) -> f64 {
    let mut partial = [0.0f64; 4];
    let quads = nodes.chunks_exact(4);
    let rest = quads.remainder();
    for quad in quads {
        for (p, &j) in partial.iter_mut().zip(quad) {
            *p += x[j as usize];
        }
    }
    let tail: f64 = rest.iter().map(|&j| x[j as usize]).sum();
    (partial[0] + partial[1]) + (partial[2] + partial[3]) + tail
}

/// Below this many edges an iteration is too short for rayon's fork/join to pay on the
/// 2-core reference machine (see `benches/graph.rs`).
pub(crate) const PARALLEL_MIN_EDGES: usize = 1 << 19;

/// Groups sorted `(key, value)` pairs into offsets over `0..n` and the values.
fn group(n: usize, sorted: impl Iterator<Item = (u32, u32)>) -> (Vec<usize>, Vec<u32>) {
    let mut offsets = vec![0usize; n + 1];
    let mut values = Vec::new();
    for (k, v) in sorted {
        offsets[k as usize + 1] += 1;
        values.push(v);
    }
    for i in 0..n {
        offsets[i + 1] += offsets[i];
    }
    (offsets, values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_self_loops_and_duplicates() {
        let (g, c) = Csr::from_edges(3, &[(0, 1), (0, 1), (1, 1), (2, 0), (1, 2)]).unwrap();
        assert_eq!(
            c,
            EdgeCleanup {
                self_loops: 1,
                duplicates: 1
            }
        );
        assert_eq!(g.m(), 3);
        assert_eq!(g.out(0), &[1]);
        assert_eq!(g.inn(0), &[2]);
        assert_eq!(g.inn(2), &[1]);
        let r = g.reversed();
        assert_eq!(r.out(0), &[2]);
        assert_eq!(
            Csr::from_out_adjacency(g.out_adjacency().0.to_vec(), g.out_adjacency().1.to_vec())
                .unwrap(),
            g
        );
    }

    #[test]
    fn rejects_out_of_range_ids() {
        let err = Csr::from_edges(2, &[(0, 5)]).unwrap_err();
        assert!(err.to_string().contains("node 5"), "{err}");
    }

    #[test]
    fn induced_subgraph_keeps_inner_edges() {
        let (g, _) = Csr::from_edges(4, &[(0, 1), (1, 2), (2, 3), (3, 0)]).unwrap();
        let s = g.induced(&[2, 3, 0]).unwrap();
        let edges: Vec<_> = s.edges().collect();
        assert_eq!(edges, vec![(0, 1), (1, 2)]);
        assert!(g.induced(&[1, 1]).is_err());
    }

    #[test]
    fn empty_graph_is_valid() {
        let (g, _) = Csr::from_edges(0, &[]).unwrap();
        assert_eq!((g.n(), g.m()), (0, 0));
    }
}
