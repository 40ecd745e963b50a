//! Edges partitioned by source: worker `w` of `P` owns the nodes `u ≡ w (mod P)` and holds
//! their out-links (for PageRank, TrustRank, HITS authorities and the SALSA components) and —
//! because inverse PageRank, anti-TrustRank and HITS hubs walk links backwards — their in-links
//! as the out-links of the reversed graph. Modulo placement spreads a power-law graph's hubs
//! over the workers, which a placement by id ranges does not.
//!
//! Each process reads the whole input once and keeps the edges of its own workers: memory per
//! process is its share of the edges plus O(N) of node bookkeeping (the label dictionary for
//! edge lists). Duplicate edges and self-loops are dropped as in [`crate::graph::Csr`]; every
//! duplicate of an edge lands on the same worker, so removing them is local.

use crate::graph::{GraphError, Result};

/// One direction of a worker's edges. Owned node `k` (global id `index + k·peers`) has the
/// neighbours `targets[slot[e]]` for `e` in `offsets[k]..offsets[k+1]`: edges name a slot among
/// the worker's distinct neighbours, so contributions are combined per destination with one
/// indexed add per edge and sent once per destination, not once per edge.
#[derive(Debug, Default)]
pub(crate) struct Adjacency {
    offsets: Vec<usize>,
    slot: Vec<u32>,
    /// The distinct neighbours (global ids), sorted.
    pub targets: Vec<u32>,
}

impl Adjacency {
    /// From `(local source, global neighbour)` pairs; returns the adjacency and the number of
    /// duplicate pairs dropped.
    fn build(n_local: usize, mut edges: Vec<(u32, u32)>) -> (Adjacency, usize) {
        edges.sort_unstable();
        let before = edges.len();
        edges.dedup();
        let duplicates = before - edges.len();
        let mut targets: Vec<u32> = edges.iter().map(|&(_, t)| t).collect();
        targets.sort_unstable();
        targets.dedup();
        let mut offsets = vec![0usize; n_local + 1];
        for &(k, _) in &edges {
            offsets[k as usize + 1] += 1;
        }
        for k in 0..n_local {
            offsets[k + 1] += offsets[k];
        }
        let slot = edges
            .iter()
            .map(|&(_, t)| targets.binary_search(&t).expect("a listed target") as u32)
            .collect();
        (
            Adjacency {
                offsets,
                slot,
                targets,
            },
            duplicates,
        )
    }

    pub fn degree(&self, k: usize) -> usize {
        self.offsets[k + 1] - self.offsets[k]
    }

    pub fn edges(&self) -> usize {
        self.slot.len()
    }

    /// For every owned node `k` with `value(k) != 0`, adds `value(k)` to each of its
    /// neighbours; appends one `(neighbour, sum)` record per neighbour reached to `out`.
    pub fn push_sum(
        &self,
        value: impl Fn(usize) -> f64,
        acc: &mut Vec<f64>,
        out: &mut Vec<(u32, f64)>,
    ) {
        acc.clear();
        acc.resize(self.targets.len(), 0.0);
        for k in 0..self.offsets.len() - 1 {
            let x = value(k);
            if x == 0.0 {
                continue;
            }
            for &s in &self.slot[self.offsets[k]..self.offsets[k + 1]] {
                acc[s as usize] += x;
            }
        }
        out.extend(
            self.targets
                .iter()
                .zip(acc.iter())
                .filter(|(_, &v)| v != 0.0)
                .map(|(&t, &v)| (t, v)),
        );
    }

    /// For every owned node `k`, offers `value(k)` to each neighbour and appends one
    /// `(neighbour, minimum offered)` record per neighbour (labels of the component search).
    pub fn push_min(
        &self,
        value: impl Fn(usize) -> f64,
        acc: &mut Vec<f64>,
        out: &mut Vec<(u32, f64)>,
    ) {
        acc.clear();
        acc.resize(self.targets.len(), f64::INFINITY);
        for k in 0..self.offsets.len() - 1 {
            let x = value(k);
            for &s in &self.slot[self.offsets[k]..self.offsets[k + 1]] {
                let a = &mut acc[s as usize];
                if x < *a {
                    *a = x;
                }
            }
        }
        out.extend(self.targets.iter().zip(acc.iter()).map(|(&t, &v)| (t, v)));
    }

    /// Feeds the adjacency to a hasher (checkpoint fingerprints).
    pub fn hash_into(&self, h: &mut impl std::hash::Hasher) {
        h.write_usize(self.offsets.len());
        self.offsets.iter().for_each(|&o| h.write_usize(o));
        self.slot.iter().for_each(|&s| h.write_u32(s));
        self.targets.iter().for_each(|&t| h.write_u32(t));
    }

    /// The neighbours (global ids) of owned node `k`.
    #[cfg(test)]
    pub fn neighbours(&self, k: usize) -> impl Iterator<Item = u32> + '_ {
        self.slot[self.offsets[k]..self.offsets[k + 1]]
            .iter()
            .map(|&s| self.targets[s as usize])
    }
}

/// What one worker holds.
#[derive(Debug)]
pub(crate) struct Partition {
    /// Nodes in the whole graph.
    pub n: usize,
    pub index: usize,
    pub peers: usize,
    /// Out-links of owned nodes.
    pub fwd: Adjacency,
    /// In-links of owned nodes (out-links in the reversed graph).
    pub rev: Adjacency,
    /// Duplicate edges this worker dropped.
    pub duplicates: usize,
}

impl Partition {
    /// Owned nodes.
    pub fn n_local(&self) -> usize {
        local_count(self.n, self.index, self.peers)
    }

    /// Global id of owned node `k`.
    pub fn global(&self, k: usize) -> u32 {
        (self.index + k * self.peers) as u32
    }

    /// Local index of owned node `u`.
    pub fn local(&self, u: u32) -> usize {
        u as usize / self.peers
    }
}

fn local_count(n: usize, index: usize, peers: usize) -> usize {
    n.saturating_sub(index).div_ceil(peers)
}

/// Collects the edges of one process's workers (`first..first + threads` of `peers`).
pub(crate) struct PartitionBuilder {
    peers: usize,
    first: usize,
    fwd: Vec<Vec<(u32, u32)>>,
    rev: Vec<Vec<(u32, u32)>>,
    /// Self-loops seen (every process sees all of them).
    pub self_loops: usize,
    /// Every edge offered, in order.
    stream: siphasher::sip::SipHasher13,
}

impl PartitionBuilder {
    pub fn new(peers: usize, first: usize, threads: usize) -> Self {
        PartitionBuilder {
            peers,
            first,
            fwd: vec![Vec::new(); threads],
            rev: vec![Vec::new(); threads],
            self_loops: 0,
            stream: siphasher::sip::SipHasher13::new_with_keys(0, 0),
        }
    }

    /// A hash of every edge offered so far, in order.
    pub fn stream_hash(&self) -> u64 {
        std::hash::Hasher::finish(&self.stream)
    }

    /// Offers the edge `u → v` (global ids); keeps it where this process owns an end.
    pub fn add(&mut self, u: u32, v: u32) {
        std::hash::Hasher::write_u64(&mut self.stream, (u64::from(u) << 32) | u64::from(v));
        if u == v {
            self.self_loops += 1;
            return;
        }
        let p = self.peers as u32;
        let threads = self.fwd.len();
        let w = (u % p) as usize;
        if w >= self.first && w < self.first + threads {
            self.fwd[w - self.first].push((u / p, v));
        }
        let w = (v % p) as usize;
        if w >= self.first && w < self.first + threads {
            self.rev[w - self.first].push((v / p, u));
        }
    }

    /// The partitions of a graph on `n` nodes, in worker order.
    pub fn finish(self, n: usize) -> Result<Vec<Partition>> {
        if n > u32::MAX as usize {
            return Err(GraphError::TooLarge {
                what: "a graph",
                n,
                limit: u32::MAX as usize,
            });
        }
        let peers = self.peers;
        let first = self.first;
        let mut out = Vec::with_capacity(self.fwd.len());
        for (t, (fwd, rev)) in self.fwd.into_iter().zip(self.rev).enumerate() {
            let index = first + t;
            let n_local = local_count(n, index, peers);
            let (fwd, duplicates) = Adjacency::build(n_local, fwd);
            let (rev, _) = Adjacency::build(n_local, rev);
            out.push(Partition {
                n,
                index,
                peers,
                fwd,
                rev,
                duplicates,
            });
        }
        Ok(out)
    }

    /// All partitions of one process for an in-memory graph.
    #[cfg(test)]
    pub fn from_csr(
        g: &crate::graph::Csr,
        peers: usize,
        first: usize,
        threads: usize,
    ) -> Result<Vec<Partition>> {
        let mut b = PartitionBuilder::new(peers, first, threads);
        g.edges().for_each(|(u, v)| b.add(u, v));
        b.finish(g.n())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::testutil::random_graph;

    #[test]
    fn partitions_cover_every_edge_once_in_both_directions() {
        let g = random_graph(3, 60, 0.1);
        for peers in 1..=4 {
            let mut fwd = Vec::new();
            let mut rev = Vec::new();
            for first in 0..peers {
                for p in PartitionBuilder::from_csr(&g, peers, first, 1).unwrap() {
                    assert_eq!(p.index, first);
                    for k in 0..p.n_local() {
                        let u = p.global(k);
                        assert_eq!(p.local(u), k);
                        assert_eq!(p.fwd.degree(k), g.out_degree(u));
                        fwd.extend(p.fwd.neighbours(k).map(|v| (u, v)));
                        rev.extend(p.rev.neighbours(k).map(|s| (s, u)));
                    }
                }
            }
            fwd.sort_unstable();
            rev.sort_unstable();
            let all: Vec<(u32, u32)> = g.edges().collect();
            assert_eq!(fwd, all, "{peers} workers");
            assert_eq!(rev, all, "{peers} workers");
        }
    }

    #[test]
    fn duplicates_and_self_loops_are_dropped() {
        let mut b = PartitionBuilder::new(2, 0, 2);
        for (u, v) in [(0, 1), (0, 1), (1, 1), (3, 0), (2, 3)] {
            b.add(u, v);
        }
        assert_eq!(b.self_loops, 1);
        let parts = b.finish(4).unwrap();
        assert_eq!(parts[0].duplicates, 1);
        assert_eq!(parts[0].fwd.edges() + parts[1].fwd.edges(), 3);
        let mut acc = Vec::new();
        let mut out = Vec::new();
        parts[0]
            .fwd
            .push_sum(|k| (k + 1) as f64, &mut acc, &mut out);
        assert_eq!(out, vec![(1, 1.0), (3, 2.0)]);
    }
}
