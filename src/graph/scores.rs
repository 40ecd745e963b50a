//! Every per-document link score at once (SPEC §2, used as features and boosts, SPEC §1.8 and
//! §3.1), computed from one graph with progress callbacks. Stored beside the index by
//! [`super::sidecar`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use super::convergence::{Convergence, IterationReport};
use super::pagerank::{pagerank, PageRankParams};
use super::simrank::{simrank_diagonal, DiagonalParams, SimRankDiagonal};
use super::{check_nodes, hits, salsa, trustrank, Csr, GraphError, Result};

/// Which pages TrustRank trusts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SeedChoice {
    /// Pages an operator marked as good (SPEC §2.5 step 2).
    Operator(Vec<u32>),
    /// Without an operator: the top L inverse-PageRank candidates (SPEC §2.5 step 1) taken as
    /// seeds unchecked — a stand-in until someone reviews them.
    TopInversePageRank(usize),
}

/// Parameters of [`compute_link_scores`]; defaults follow SPEC §2.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkScoreOptions {
    /// PageRank and inverse PageRank (uniform teleport; a teleport vector here is ignored).
    pub pagerank: PageRankParams,
    /// Global HITS.
    pub hits: Convergence,
    /// TrustRank and anti-TrustRank damping and iterations (SPEC: α_B = 0.85, M_B = 20).
    pub trust: PageRankParams,
    pub seeds: SeedChoice,
    /// Known spam pages for anti-TrustRank; empty leaves anti-TrustRank at 0.
    pub spam_seeds: Vec<u32>,
    /// `c` of the spam mass; `None` is `|seeds|/N`.
    pub spam_mass_scale: Option<f64>,
    /// SimRank's diagonal correction, what `/similar` needs (SPEC §2.4).
    pub simrank: DiagonalParams,
}

impl Default for LinkScoreOptions {
    fn default() -> Self {
        LinkScoreOptions {
            pagerank: PageRankParams::default(),
            hits: Convergence::default(),
            trust: trustrank::default_params(),
            seeds: SeedChoice::TopInversePageRank(trustrank::DEFAULT_CANDIDATES),
            spam_seeds: Vec::new(),
            spam_mass_scale: None,
            simrank: DiagonalParams::default(),
        }
    }
}

/// Progress of [`compute_link_scores`]: stage `step` of `steps` is starting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub stage: &'static str,
    pub step: usize,
    pub steps: usize,
}

/// Link scores of every node; entry i of each vector belongs to node i, whose key is
/// `keys[i]` (a document id for index graphs, the file label for bare graphs).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LinkScores {
    pub keys: Vec<String>,
    #[serde(with = "super::f64_bits")]
    pub pagerank: Vec<f64>,
    #[serde(with = "super::f64_bits")]
    pub inverse_pagerank: Vec<f64>,
    #[serde(with = "super::f64_bits")]
    pub trustrank: Vec<f64>,
    #[serde(with = "super::f64_bits")]
    pub spam_mass: Vec<f64>,
    #[serde(with = "super::f64_bits")]
    pub anti_trustrank: Vec<f64>,
    #[serde(with = "super::f64_bits")]
    pub hits_hub: Vec<f64>,
    #[serde(with = "super::f64_bits")]
    pub hits_authority: Vec<f64>,
    #[serde(with = "super::f64_bits")]
    pub salsa_hub: Vec<f64>,
    #[serde(with = "super::f64_bits")]
    pub salsa_authority: Vec<f64>,
    pub in_degree: Vec<u32>,
    pub out_degree: Vec<u32>,
    /// The trusted seeds actually used, and the spam seeds.
    pub trust_seeds: Vec<u32>,
    pub spam_seeds: Vec<u32>,
    /// How each iteration ended, by algorithm name (rank stability included).
    pub reports: BTreeMap<String, IterationReport>,
    /// The graph itself (out-adjacency), so `/similar` can run SimRank without a rebuild.
    pub out_offsets: Vec<usize>,
    pub out_targets: Vec<u32>,
    /// SimRank's diagonal correction for single-source queries (`/similar`, SPEC §2.4).
    pub simrank: SimRankDiagonal,
    /// Set when these are one shard's part of a collection's scores ([`LinkScores::part`]):
    /// entry i then belongs to the collection's node `part.global[i]`, and `out_targets`
    /// hold collection node numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<ShardPart>,
}

/// Where one shard's part of a collection's link scores sits in the whole graph.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ShardPart {
    /// Nodes of the whole graph (the `N` of the scores' normalisations).
    pub nodes: usize,
    /// The collection node of each of the part's entries, ascending.
    pub global: Vec<u32>,
}

impl LinkScores {
    pub fn n(&self) -> usize {
        self.keys.len()
    }

    /// The graph the scores were computed on.
    pub fn graph(&self) -> Result<Csr> {
        Csr::from_out_adjacency(self.out_offsets.clone(), self.out_targets.clone())
    }

    /// Nodes of the whole graph: the part's [`ShardPart::nodes`], else [`LinkScores::n`].
    pub fn total_nodes(&self) -> usize {
        self.part.as_ref().map_or(self.n(), |p| p.nodes)
    }

    /// The whole graph's scores restricted to `nodes` (ascending, each below `n()`): what a
    /// shard of the collection stores for its own documents. Each node keeps its scores,
    /// degrees, SimRank diagonal entry and out-links (as whole-graph node numbers), so a
    /// shard needs 1/S of the whole; the window features of a window spread over shards are
    /// computed from the out-links its shards send (`crate::features::link::window_columns`).
    /// Seeds and reports stay those of the whole computation.
    pub fn part(&self, nodes: &[u32]) -> Result<LinkScores> {
        if self.part.is_some() {
            return Err(GraphError::InvalidParameter {
                name: "link scores",
                message: "already a shard's part".into(),
            });
        }
        check_nodes(nodes, self.n())?;
        if nodes.windows(2).any(|w| w[0] >= w[1]) {
            return Err(GraphError::InvalidParameter {
                name: "node set",
                message: "a shard's nodes must be ascending and distinct".into(),
            });
        }
        let pick = |v: &[f64]| nodes.iter().map(|&u| v[u as usize]).collect::<Vec<f64>>();
        let mut out_offsets = Vec::with_capacity(nodes.len() + 1);
        let mut out_targets = Vec::new();
        out_offsets.push(0);
        for &u in nodes {
            let u = u as usize;
            out_targets
                .extend_from_slice(&self.out_targets[self.out_offsets[u]..self.out_offsets[u + 1]]);
            out_offsets.push(out_targets.len());
        }
        Ok(LinkScores {
            keys: nodes
                .iter()
                .map(|&u| self.keys[u as usize].clone())
                .collect(),
            pagerank: pick(&self.pagerank),
            inverse_pagerank: pick(&self.inverse_pagerank),
            trustrank: pick(&self.trustrank),
            spam_mass: pick(&self.spam_mass),
            anti_trustrank: pick(&self.anti_trustrank),
            hits_hub: pick(&self.hits_hub),
            hits_authority: pick(&self.hits_authority),
            salsa_hub: pick(&self.salsa_hub),
            salsa_authority: pick(&self.salsa_authority),
            in_degree: nodes.iter().map(|&u| self.in_degree[u as usize]).collect(),
            out_degree: nodes.iter().map(|&u| self.out_degree[u as usize]).collect(),
            trust_seeds: self.trust_seeds.clone(),
            spam_seeds: self.spam_seeds.clone(),
            reports: self.reports.clone(),
            out_offsets,
            out_targets,
            simrank: SimRankDiagonal {
                values: if self.simrank.values.is_empty() {
                    Vec::new()
                } else {
                    pick(&self.simrank.values)
                },
                params: self.simrank.params,
            },
            part: Some(ShardPart {
                nodes: self.n(),
                global: nodes.to_vec(),
            }),
        })
    }

    /// Entry `i`'s out-links as whole-graph node numbers.
    pub fn out_links(&self, i: u32) -> &[u32] {
        let i = i as usize;
        &self.out_targets[self.out_offsets[i]..self.out_offsets[i + 1]]
    }

    /// Entry `i`'s whole-graph node number.
    pub fn global(&self, i: u32) -> u32 {
        self.part.as_ref().map_or(i, |p| p.global[i as usize])
    }

    /// Index of every key, for wiring scores to documents.
    pub fn key_index(&self) -> std::collections::HashMap<&str, u32> {
        self.keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.as_str(), i as u32))
            .collect()
    }
}

const STAGES: [&str; 7] = [
    "pagerank",
    "inverse pagerank",
    "trustrank",
    "anti-trustrank",
    "hits",
    "salsa",
    "simrank diagonal",
];

/// Computes every score. `keys` names the nodes (one per node). `progress` is called as each
/// stage starts and once more with `step == steps` at the end.
pub fn compute_link_scores(
    g: &Csr,
    keys: Vec<String>,
    options: &LinkScoreOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<LinkScores> {
    compute_link_scores_cancellable(g, keys, options, progress, &AtomicBool::new(false))
}

/// [`compute_link_scores`] that stops with [`GraphError::Cancelled`] when `cancel` is set:
/// the flag is checked before each algorithm (a single algorithm runs to its end; the longest,
/// SimRank's diagonal, costs R pairs of walks per node: seconds on the Rust docs' 33k pages).
pub fn compute_link_scores_cancellable(
    g: &Csr,
    keys: Vec<String>,
    options: &LinkScoreOptions,
    progress: &mut dyn FnMut(Progress),
    cancel: &AtomicBool,
) -> Result<LinkScores> {
    compute(g, keys, options, progress, cancel, true)
}

/// Every per-node score without SimRank's diagonal (left empty): what a bare graph's score
/// table holds, where `/similar` is not served.
pub(crate) fn compute_node_scores(
    g: &Csr,
    keys: Vec<String>,
    options: &LinkScoreOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<LinkScores> {
    compute(g, keys, options, progress, &AtomicBool::new(false), false)
}

fn compute(
    g: &Csr,
    keys: Vec<String>,
    options: &LinkScoreOptions,
    progress: &mut dyn FnMut(Progress),
    cancel: &AtomicBool,
    with_simrank: bool,
) -> Result<LinkScores> {
    let n = g.n();
    if keys.len() != n {
        return Err(GraphError::InvalidParameter {
            name: "node keys",
            message: format!("{} keys for {n} nodes", keys.len()),
        });
    }
    check_nodes(&options.spam_seeds, n)?;
    let mut stage = 0;
    let mut next_stage = |progress: &mut dyn FnMut(Progress)| -> Result<()> {
        if cancel.load(Ordering::SeqCst) {
            return Err(GraphError::Cancelled);
        }
        progress(Progress {
            stage: STAGES.get(stage).copied().unwrap_or("done"),
            step: stage,
            steps: STAGES.len(),
        });
        stage += 1;
        Ok(())
    };
    let mut reports = BTreeMap::new();
    let plain = PageRankParams {
        teleport: None,
        ..options.pagerank.clone()
    };

    next_stage(progress)?;
    let (pr, report) = pagerank(g, &plain)?;
    reports.insert("pagerank".to_owned(), report);

    next_stage(progress)?;
    let (inverse, report) = trustrank::inverse_pagerank(g, &plain)?;
    reports.insert("inverse_pagerank".to_owned(), report);

    next_stage(progress)?;
    let trust_seeds = match &options.seeds {
        SeedChoice::Operator(seeds) => seeds.clone(),
        SeedChoice::TopInversePageRank(l) => trustrank::seed_candidates(&inverse, *l),
    };
    let (trust, mass) = if n == 0 {
        (Vec::new(), Vec::new())
    } else {
        let (trust, report) = trustrank::trustrank(g, &trust_seeds, &options.trust)?;
        reports.insert("trustrank".to_owned(), report);
        let c = options
            .spam_mass_scale
            .unwrap_or_else(|| trustrank::default_scale(trust_seeds.len(), n));
        let mass = trustrank::spam_mass(&pr, &trust, c)?;
        (trust, mass)
    };

    next_stage(progress)?;
    let distrust = if options.spam_seeds.is_empty() {
        vec![0.0; n]
    } else {
        let (d, report) = trustrank::anti_trustrank(g, &options.spam_seeds, &options.trust)?;
        reports.insert("anti_trustrank".to_owned(), report);
        d
    };

    next_stage(progress)?;
    let (h, report) = hits::hits(g, &options.hits, None)?;
    reports.insert("hits".to_owned(), report);

    next_stage(progress)?;
    let s = salsa::salsa(g);

    next_stage(progress)?;
    let simrank = if with_simrank {
        simrank_diagonal(g, &options.simrank)?
    } else {
        SimRankDiagonal::default()
    };
    next_stage(progress)?;

    let (offsets, targets) = g.out_adjacency();
    Ok(LinkScores {
        keys,
        pagerank: pr,
        inverse_pagerank: inverse,
        trustrank: trust,
        spam_mass: mass,
        anti_trustrank: distrust,
        hits_hub: h.hub,
        hits_authority: h.authority,
        salsa_hub: s.hub,
        salsa_authority: s.authority,
        in_degree: (0..n as u32).map(|u| g.in_degree(u) as u32).collect(),
        out_degree: (0..n as u32).map(|u| g.out_degree(u) as u32).collect(),
        trust_seeds,
        spam_seeds: options.spam_seeds.clone(),
        reports,
        out_offsets: offsets.to_vec(),
        out_targets: targets.to_vec(),
        simrank,
        part: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::testutil::random_graph;

    #[test]
    fn computes_every_score_and_reports_progress() {
        let g = random_graph(2, 50, 0.06);
        let keys: Vec<String> = (0..50).map(|i| format!("doc{i}")).collect();
        let mut stages = Vec::new();
        let options = LinkScoreOptions {
            spam_seeds: vec![4],
            ..LinkScoreOptions::default()
        };
        let s = compute_link_scores(&g, keys, &options, &mut |p| stages.push(p.stage)).unwrap();
        assert_eq!(stages.len(), STAGES.len() + 1);
        assert_eq!(stages.last(), Some(&"done"));
        assert_eq!(s.trust_seeds.len(), 50);
        assert_eq!(s.graph().unwrap(), g);
        assert_eq!(s.key_index()["doc7"], 7);
        assert_eq!(
            s.pagerank,
            pagerank(&g, &PageRankParams::default()).unwrap().0
        );
        assert_eq!(s.salsa_authority, salsa::salsa(&g).authority);
        assert!(s.anti_trustrank[4] > 0.0);
        assert_eq!(s.reports["trustrank"].iterations, 20);
    }

    #[test]
    fn a_raised_cancel_flag_stops_between_algorithms() {
        let g = random_graph(3, 40, 0.1);
        let keys: Vec<String> = (0..40).map(|i| format!("doc{i}")).collect();
        let cancel = AtomicBool::new(false);
        let mut stages = Vec::new();
        let err = compute_link_scores_cancellable(
            &g,
            keys,
            &LinkScoreOptions::default(),
            &mut |p| {
                stages.push(p.stage);
                if p.stage == "trustrank" {
                    cancel.store(true, Ordering::SeqCst);
                }
            },
            &cancel,
        )
        .unwrap_err();
        assert!(matches!(err, GraphError::Cancelled), "{err}");
        assert_eq!(stages, ["pagerank", "inverse pagerank", "trustrank"]);
    }

    #[test]
    fn bad_inputs_are_errors_and_empty_graph_is_empty() {
        let g = random_graph(2, 5, 0.3);
        assert!(
            compute_link_scores(&g, vec![], &LinkScoreOptions::default(), &mut |_| {}).is_err()
        );
        let bad_seed = LinkScoreOptions {
            seeds: SeedChoice::Operator(vec![99]),
            ..LinkScoreOptions::default()
        };
        let keys: Vec<String> = (0..5).map(|i| i.to_string()).collect();
        let err = compute_link_scores(&g, keys, &bad_seed, &mut |_| {}).unwrap_err();
        assert!(err.to_string().contains("node 99"), "{err}");
        let (empty, _) = Csr::from_edges(0, &[]).unwrap();
        let s =
            compute_link_scores(&empty, vec![], &LinkScoreOptions::default(), &mut |_| {}).unwrap();
        assert_eq!(s.n(), 0);
    }
}
