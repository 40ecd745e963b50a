//! The dataflow engine against the CSR engine (the oracle: itself checked against networkx,
//! a dense linear solve and the literature's examples).

use super::*;
use crate::graph::convergence::Convergence;
use crate::graph::testutil::random_graph;
use crate::graph::{compute_link_scores, pagerank::PageRankParams};

fn tight() -> LinkScoreOptions {
    let conv = Convergence {
        tol_per_node: 1e-15,
        max_iter: 2000,
        ..Convergence::default()
    };
    LinkScoreOptions {
        pagerank: PageRankParams {
            convergence: conv,
            ..PageRankParams::default()
        },
        hits: conv,
        spam_seeds: vec![3, 5],
        ..LinkScoreOptions::default()
    }
}

fn l1(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum()
}

fn assert_agree(
    g: &Csr,
    options: &LinkScoreOptions,
    threads: usize,
    checkpointing: Option<&Checkpointing>,
) -> DataflowScores {
    let keys: Vec<String> = (0..g.n()).map(|i| i.to_string()).collect();
    let csr = compute_link_scores(g, keys, options, &mut |_| {}).unwrap();
    let report = run(
        &Input::Graph(Arc::new(g.clone())),
        options,
        &Cluster::local(threads),
        checkpointing,
        None,
    )
    .unwrap();
    let d = report.scores.expect("process 0 has the scores");
    for (name, a, b) in [
        ("pagerank", &d.pagerank, &csr.pagerank),
        ("inverse", &d.inverse_pagerank, &csr.inverse_pagerank),
        ("trustrank", &d.trustrank, &csr.trustrank),
        ("anti-trustrank", &d.anti_trustrank, &csr.anti_trustrank),
        ("hits hub", &d.hits_hub, &csr.hits_hub),
        ("hits authority", &d.hits_authority, &csr.hits_authority),
    ] {
        let diff = l1(a, b);
        assert!(diff < 1e-12, "{name} with {threads} workers: L1 {diff:e}");
    }
    // Spam mass is a ratio: compare relative to PageRank.
    assert!(l1(&d.spam_mass, &csr.spam_mass) < 1e-9, "spam mass");
    assert_eq!(d.salsa_hub, csr.salsa_hub, "SALSA hubs bit for bit");
    assert_eq!(d.salsa_authority, csr.salsa_authority);
    assert_eq!(d.in_degree, csr.in_degree);
    assert_eq!(d.out_degree, csr.out_degree);
    assert_eq!(d.trust_seeds, csr.trust_seeds);
    assert_eq!(d.edges, g.m());
    assert_eq!(
        d.reports["trustrank"].iterations,
        csr.reports["trustrank"].iterations
    );
    d
}

#[test]
fn agrees_with_the_csr_engine_for_one_to_four_workers() {
    for (seed, n, p) in [(1, 120, 0.03), (2, 200, 0.01), (3, 60, 0.2)] {
        let g = random_graph(seed, n, p);
        for threads in 1..=4 {
            assert_agree(&g, &tight(), threads, None);
        }
    }
}

#[test]
fn default_options_stop_on_the_same_iteration() {
    let g = random_graph(9, 300, 0.02);
    let keys: Vec<String> = (0..g.n()).map(|i| i.to_string()).collect();
    let options = LinkScoreOptions::default();
    let csr = compute_link_scores(&g, keys, &options, &mut |_| {}).unwrap();
    let d = run(
        &Input::Graph(Arc::new(g)),
        &options,
        &Cluster::local(3),
        None,
        None,
    )
    .unwrap()
    .scores
    .unwrap();
    for name in ["pagerank", "inverse_pagerank", "hits"] {
        assert_eq!(
            d.reports[name].iterations, csr.reports[name].iterations,
            "{name}"
        );
        assert_eq!(
            d.reports[name].converged, csr.reports[name].converged,
            "{name}"
        );
    }
    assert!(l1(&d.pagerank, &csr.pagerank) < 1e-12);
}

#[test]
fn degenerate_graphs() {
    let (empty, _) = Csr::from_edges(0, &[]).unwrap();
    let options = LinkScoreOptions::default();
    let d = run(
        &Input::Graph(Arc::new(empty)),
        &options,
        &Cluster::local(2),
        None,
        None,
    )
    .unwrap()
    .scores
    .unwrap();
    assert_eq!(d.n(), 0);
    // Fewer nodes than workers, and no edges at all.
    let (g, _) = Csr::from_edges(3, &[]).unwrap();
    let options = LinkScoreOptions {
        seeds: SeedChoice::Operator(vec![1]),
        ..LinkScoreOptions::default()
    };
    assert_agree(&g, &options, 4, None);
    let (g, _) = Csr::from_edges(3, &[(0, 1), (1, 2)]).unwrap();
    assert_agree(&g, &options, 4, None);
}

#[test]
fn bad_seeds_and_cluster_settings_are_errors() {
    let g = Arc::new(random_graph(2, 20, 0.1));
    let options = LinkScoreOptions {
        seeds: SeedChoice::Operator(vec![99]),
        ..LinkScoreOptions::default()
    };
    let err = run(
        &Input::Graph(g.clone()),
        &options,
        &Cluster::local(2),
        None,
        None,
    )
    .unwrap_err();
    assert!(err.to_string().contains("node 99"), "{err}");
    let mut cluster = Cluster::local(1);
    cluster.processes = 2;
    cluster.process = 2;
    let err = run(
        &Input::Graph(g.clone()),
        &LinkScoreOptions::default(),
        &cluster,
        None,
        None,
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("process 2 does not exist"),
        "{err}"
    );
    cluster.process = 1;
    cluster.hosts = vec!["127.0.0.1:1".into()];
    let err = run(
        &Input::Graph(g),
        &LinkScoreOptions::default(),
        &cluster,
        None,
        None,
    )
    .unwrap_err();
    assert!(err.to_string().contains("names 1 processes"), "{err}");
}

#[test]
fn an_unreachable_peer_is_an_error_after_the_timeout() {
    let g = Arc::new(random_graph(2, 20, 0.1));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Process 1 of 2: process 0 (which it must connect to) never starts.
    let cluster = Cluster {
        threads: 1,
        processes: 2,
        process: 1,
        hosts: vec!["127.0.0.1:9".into(), format!("127.0.0.1:{port}")],
        connect_timeout: Duration::from_secs(2),
    };
    let start = Instant::now();
    let err = run(
        &Input::Graph(g),
        &LinkScoreOptions::default(),
        &cluster,
        None,
        None,
    )
    .unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(
        err.to_string().contains("did not all connect within 2 s"),
        "{err}"
    );
    assert!(err.to_string().contains("0 at 127.0.0.1:9"), "{err}");
}

#[test]
fn resumes_from_checkpoints_with_the_same_result() {
    let g = random_graph(4, 150, 0.03);
    let dir = tempfile::tempdir().unwrap();
    let checkpointing = Checkpointing {
        dir: dir.path().to_path_buf(),
        every: 3,
    };
    let full = assert_agree(&g, &tight(), 2, Some(&checkpointing));
    let files = std::fs::read_dir(dir.path()).unwrap().count();
    assert!(files > 0);
    // Everything finished: a rerun loads the final states and computes nothing.
    let again = run(
        &Input::Graph(Arc::new(g.clone())),
        &tight(),
        &Cluster::local(2),
        Some(&checkpointing),
        None,
    )
    .unwrap();
    assert_eq!(again.scores.as_ref().unwrap(), &full);
    assert!(
        again.stats.iter().all(|s| s.resumed_at.is_some()),
        "{:?}",
        again.stats
    );
    // Drop the final states of HITS and SALSA: the job resumes from their last periodic
    // checkpoints and ends with the same scores.
    for entry in std::fs::read_dir(dir.path()).unwrap().flatten() {
        let name = entry.file_name().into_string().unwrap();
        let iteration: usize = name.rsplit('.').nth(1).unwrap().parse().unwrap();
        if (name.starts_with("hits") || name.starts_with("salsa")) && iteration >= checkpoint::FINAL
        {
            std::fs::remove_file(entry.path()).unwrap();
        }
    }
    let resumed = run(
        &Input::Graph(Arc::new(g)),
        &tight(),
        &Cluster::local(2),
        Some(&checkpointing),
        None,
    )
    .unwrap();
    let hits = resumed.stats.iter().find(|s| s.name == "hits").unwrap();
    let at = hits.resumed_at.expect("HITS resumed");
    assert!(
        at % 3 == 0 && at < checkpoint::FINAL && hits.iterations >= at,
        "{hits:?}"
    );
    let salsa = resumed.stats.iter().find(|s| s.name == "salsa").unwrap();
    assert!(salsa.iterations >= 3, "{salsa:?}");
    assert_eq!(
        salsa.resumed_at,
        Some(salsa.iterations / 3 * 3),
        "{salsa:?}"
    );
    let r = resumed.scores.unwrap();
    assert!(l1(&r.hits_hub, &full.hits_hub) < 1e-15);
    assert!(l1(&r.hits_authority, &full.hits_authority) < 1e-15);
    assert_eq!(r.salsa_authority, full.salsa_authority);
    assert_eq!(r.pagerank, full.pagerank);
    // Another worker count is another job: its checkpoints are not used.
    let other = run(
        &Input::Graph(Arc::new(random_graph(4, 150, 0.03))),
        &tight(),
        &Cluster::local(3),
        Some(&checkpointing),
        None,
    )
    .unwrap();
    assert!(other.stats.iter().all(|s| s.resumed_at.is_none()));
}

#[test]
fn edge_lists_and_bvgraphs_give_the_same_scores() {
    let dir = tempfile::tempdir().unwrap();
    let mut edges = Vec::new();
    crate::graph::rmat::rmat(&crate::graph::rmat::RmatParams::graph500(8, 3), |u, v| {
        edges.push((u, v))
    })
    .unwrap();
    let text: String = edges.iter().map(|(u, v)| format!("{u}\t{v}\n")).collect();
    let path = dir.path().join("g.txt");
    std::fs::write(&path, format!("# R-MAT\n{text}")).unwrap();
    let base = dir.path().join("g");
    crate::graph::bvgraph::write(&base, 256, edges.iter().copied()).unwrap();
    let options = LinkScoreOptions::default();
    let cluster = Cluster::local(2);
    let from_list = run(
        &Input::EdgeList(path.clone()),
        &options,
        &cluster,
        None,
        None,
    )
    .unwrap();
    let from_bv = run(&Input::BvGraph(base), &options, &cluster, None, None).unwrap();
    let from_rmat = run(
        &Input::Rmat(crate::graph::rmat::RmatParams::graph500(8, 3)),
        &options,
        &cluster,
        None,
        None,
    )
    .unwrap();
    let (list, bv, rm) = (
        from_list.scores.unwrap(),
        from_bv.scores.unwrap(),
        from_rmat.scores.unwrap(),
    );
    assert_eq!(bv.pagerank, rm.pagerank);
    // The edge list numbers nodes by first appearance: map back through the labels.
    let labels = list.labels.as_ref().unwrap();
    let lg = crate::graph::load_graph_file(&path).unwrap();
    assert_eq!(labels, &lg.labels);
    let keys = lg.labels.clone();
    let csr = compute_link_scores(&lg.csr, keys, &options, &mut |_| {}).unwrap();
    assert!(l1(&list.pagerank, &csr.pagerank) < 1e-12);
    assert_eq!(list.edges, lg.csr.m());
    let (whole, _) = Csr::from_edges(256, &edges).unwrap();
    let keys = (0..256).map(|i| i.to_string()).collect();
    let csr = compute_link_scores(&whole, keys, &options, &mut |_| {}).unwrap();
    assert!(l1(&bv.hits_authority, &csr.hits_authority) < 1e-12);
    assert_eq!(bv.edges, whole.m());
    // A bad line is named.
    std::fs::write(&path, "1 2\n3 x\n").unwrap();
    let err = run(&Input::EdgeList(path), &options, &cluster, None, None).unwrap_err();
    assert!(err.to_string().contains("g.txt:2"), "{err}");
}
