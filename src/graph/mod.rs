//! Link analysis (SPEC §2).
//!
//! Documents' links become a petgraph graph ([`build`]) for construction and components, which is
//! frozen into a compressed sparse row layout ([`Csr`]) of `u32` node ids: the iterative
//! algorithms are sparse matrix–vector products over it. One file per algorithm:
//! [`pagerank`] (also personalized and topic-sensitive), [`hits`], [`salsa`], [`simrank`],
//! [`trustrank`]; [`base_set`] is the query-dependent neighbourhood shared by HITS and SALSA;
//! [`convergence`] holds the stopping rule and the rank-stability report. [`scores`] computes
//! every per-node score at once and [`sidecar`] stores them beside an index, their vectors as
//! exact bit patterns ([`f64_bits`]). Bare edge-list files load through [`load`], WebGraph
//! BVGraphs through [`bvgraph`]; [`rmat`] generates the synthetic benchmark graphs.
//! [`dataflow`] computes the same scores on timely dataflow, over several threads or processes.

pub mod base_set;
pub mod build;
pub mod bvgraph;
pub mod convergence;
pub mod csr;
pub mod dataflow;
pub mod f64_bits;
pub mod hits;
pub mod load;
pub mod pagerank;
pub mod rmat;
pub mod salsa;
pub mod scores;
pub mod sidecar;
pub mod simrank;
pub mod trustrank;

pub use build::{build_link_graph, BuildOptions, DocLinks, LinkGraph};
pub use convergence::{Convergence, IterationReport};
pub use csr::Csr;
pub use load::{load_graph_file, LabeledGraph};
pub use scores::{
    compute_link_scores, compute_link_scores_cancellable, LinkScoreOptions, LinkScores, SeedChoice,
};

/// Everything that can go wrong in link analysis. Messages name the file, line or parameter.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    #[error("{path}:{line}: {message}")]
    Parse {
        path: String,
        line: usize,
        message: String,
    },
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("node {id} does not exist (the graph has {n} nodes)")]
    NodeOutOfRange { id: u64, n: usize },
    #[error("invalid {name}: {message}")]
    InvalidParameter { name: &'static str, message: String },
    #[error("{what} is limited to {limit} nodes; this graph has {n}")]
    TooLarge {
        what: &'static str,
        n: usize,
        limit: usize,
    },
    #[error("link-score file {path}: {message}")]
    Sidecar { path: String, message: String },
    #[error("cancelled on request")]
    Cancelled,
    #[error("{path}: {message}")]
    Format { path: String, message: String },
    #[error("graph job failed: {0}")]
    Job(String),
}

pub type Result<T> = std::result::Result<T, GraphError>;

/// Checks a damping factor: outside (0, 1) the iterations either do not mix or do not converge.
pub(crate) fn check_damping(alpha: f64) -> Result<()> {
    if alpha.is_finite() && alpha > 0.0 && alpha < 1.0 {
        Ok(())
    } else {
        Err(GraphError::InvalidParameter {
            name: "damping",
            message: format!("{alpha} is not in (0, 1)"),
        })
    }
}

/// Checks that every node id names a node of a graph with `n` nodes.
pub(crate) fn check_nodes(ids: &[u32], n: usize) -> Result<()> {
    match ids.iter().find(|&&id| id as usize >= n) {
        Some(&id) => Err(GraphError::NodeOutOfRange { id: id as u64, n }),
        None => Ok(()),
    }
}

#[cfg(test)]
pub(crate) mod testutil;
