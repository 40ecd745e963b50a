//! `rankd graph` on timely dataflow across real processes on loopback (issue 14): the same
//! scores as the in-process CSR engine for 1–4 processes, a killed process fails the job
//! without writing, a restarted job resumes from its checkpoints, and bad cluster inputs are
//! clear errors after a bounded wait.

use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use crate::util::rankd_command;

const WIKI_VOTE: &str = "../shared/data/graphs/wiki-Vote.txt";

/// Loopback addresses with ports free right now, one per process.
fn hostfile(dir: &Path, processes: usize) -> PathBuf {
    let listeners: Vec<_> = (0..processes)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let text: String = listeners
        .iter()
        .map(|l| format!("127.0.0.1:{}\n", l.local_addr().unwrap().port()))
        .collect();
    let path = dir.join(format!("hosts{processes}"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Starts process `i` of `processes` with `args`.
fn spawn(args: &[&str], processes: usize, i: usize, hosts: &Path) -> Child {
    rankd_command()
        .args(args)
        .args([
            "--processes",
            &processes.to_string(),
            "--process",
            &i.to_string(),
        ])
        .arg("--hostfile")
        .arg(hosts)
        .args(["--connect-timeout", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn run_cluster(args: &[&str], processes: usize, dir: &Path) -> Vec<Output> {
    let hosts = hostfile(dir, processes);
    let children: Vec<Child> = (0..processes)
        .map(|i| spawn(args, processes, i, &hosts))
        .collect();
    children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect()
}

/// The score table: label → the eleven columns.
fn table(path: &Path) -> std::collections::BTreeMap<String, Vec<f64>> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let mut f = l.split('\t');
            let key = f.next().unwrap().to_owned();
            (key, f.map(|x| x.parse().unwrap()).collect())
        })
        .collect()
}

/// Per-column L1 distance of two tables over the same nodes.
fn l1_by_column(a: &Path, b: &Path) -> Vec<f64> {
    let (a, b) = (table(a), table(b));
    assert_eq!(a.len(), b.len());
    let mut out = vec![0.0; 11];
    for (key, row) in &a {
        let other = &b[key];
        for c in 0..11 {
            out[c] += (row[c] - other[c]).abs();
        }
    }
    out
}

#[test]
fn one_to_four_processes_agree_with_the_csr_engine_on_wiki_vote() {
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("csr.tsv");
    let common = [
        "graph",
        "--edges",
        WIKI_VOTE,
        "--tolerance",
        "1e-15",
        "--max-iter",
        "2000",
    ];
    let out = rankd_command()
        .args(common)
        .arg("--output")
        .arg(&reference)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for processes in 1..=4 {
        let output = dir.path().join(format!("p{processes}.tsv"));
        let mut args: Vec<&str> = common.to_vec();
        let output_s = output.to_str().unwrap().to_owned();
        args.extend(["--output", &output_s, "--json"]);
        let outs = run_cluster(&args, processes, dir.path());
        for (i, o) in outs.iter().enumerate() {
            assert!(
                o.status.success(),
                "process {i} of {processes}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            // stdout is one JSON object, whatever timely printed while connecting.
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(v["process"], i);
        }
        let diffs = l1_by_column(&reference, &output);
        // Columns: 0 pagerank … 4 anti-trustrank, 5–6 HITS, 7–8 SALSA, 9–10 degrees. Spam
        // mass (3) is a ratio near 1 per node: compared relative to the node count.
        for (c, d) in diffs.iter().enumerate() {
            let limit = if c == 3 { 1e-12 * 7115.0 } else { 1e-12 };
            assert!(*d < limit, "{processes} processes, column {c}: L1 {d:e}");
        }
        assert_eq!(
            diffs[7..].iter().sum::<f64>(),
            0.0,
            "SALSA and degrees exact"
        );
    }
}

/// Waits until every worker has written a checkpoint of `algorithm` at an iteration ≥ `at`
/// (files `ALGORITHM.FINGERPRINT.wIofN.ITERATION.ckpt`): a restart resumes at the latest
/// iteration all workers saved, so one fast worker alone proves nothing.
fn wait_for_checkpoint(dir: &Path, algorithm: &str, at: usize, deadline: Instant) -> bool {
    while Instant::now() < deadline {
        let mut reached = std::collections::BTreeSet::new();
        let mut workers = None;
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                let name = e.file_name().into_string().unwrap_or_default();
                let Some(rest) = name.strip_prefix(&format!("{algorithm}.")) else {
                    continue;
                };
                let parts: Vec<&str> = rest.split('.').collect();
                let (Some(worker), Some(it)) = (parts.get(1), parts.get(2)) else {
                    continue;
                };
                let Some((_, of)) = worker.split_once("of") else {
                    continue;
                };
                workers = of.parse::<usize>().ok();
                if it.parse::<usize>().is_ok_and(|i| i >= at) {
                    reached.insert(worker.to_string());
                }
            }
        }
        if workers.is_some_and(|n| reached.len() == n) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn a_killed_process_fails_the_job_and_a_restart_resumes_to_the_same_scores() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("ckpt");
    let output = dir.path().join("scores.tsv");
    let (ckpt_s, output_s) = (
        ckpt.to_str().unwrap().to_owned(),
        output.to_str().unwrap().to_owned(),
    );
    // A fixed 400 iterations (tolerance 0) so the job is still running when killed.
    let args = [
        "graph",
        "--rmat",
        "13",
        "--tolerance",
        "0",
        "--max-iter",
        "400",
        "--output",
        &output_s,
        "--checkpoint-dir",
        &ckpt_s,
        "--checkpoint-every",
        "5",
    ];
    let hosts = hostfile(dir.path(), 2);
    let p0 = spawn(&args, 2, 0, &hosts);
    let mut p1 = spawn(&args, 2, 1, &hosts);
    let deadline = Instant::now() + Duration::from_secs(120);
    assert!(
        wait_for_checkpoint(&ckpt, "pagerank", 10, deadline),
        "no checkpoint appeared"
    );
    p1.kill().unwrap(); // SIGKILL
    let killed = Instant::now();
    p1.wait().unwrap();
    let out = p0.wait_with_output().unwrap();
    let failed_in = killed.elapsed();
    assert!(!out.status.success());
    assert!(
        failed_in < Duration::from_secs(10),
        "took {failed_in:?} to fail"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("lost the connection to another process"),
        "{stderr}"
    );
    assert!(!output.exists(), "a failed job wrote its output");
    let status: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ckpt.join("status.0.json")).unwrap())
            .unwrap();
    assert_eq!(status["state"], "failed");

    // Restart: both processes resume from the checkpoints.
    let outs = run_cluster(&[&args[..], &["--json"]].concat(), 2, dir.path());
    for o in &outs {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let report: serde_json::Value = serde_json::from_slice(&outs[0].stdout).unwrap();
    let resumed = report["stats"][0]["resumed_at"].as_u64().expect("resumed");
    // Mid-way through PageRank (a finished stage would resume at 1e9 + its iterations).
    assert!(
        (10..400).contains(&resumed) && resumed.is_multiple_of(5),
        "{report}"
    );
    // The same scores as one process that was never interrupted.
    let clean = dir.path().join("clean.tsv");
    let out = rankd_command()
        .args([
            "graph",
            "--rmat",
            "13",
            "--tolerance",
            "0",
            "--max-iter",
            "400",
            "--workers",
            "1",
        ])
        .arg("--output")
        .arg(&clean)
        .output()
        .unwrap();
    assert!(out.status.success());
    for (c, d) in l1_by_column(&clean, &output).iter().enumerate() {
        assert!(*d < 1e-12, "column {c}: L1 {d:e}");
    }
}

fn graph_error(args: &[&str]) -> (i32, String, Duration) {
    let start = Instant::now();
    let out = rankd_command().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        start.elapsed(),
    )
}

#[test]
fn bad_cluster_inputs_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.tsv");
    let out_s = out.to_str().unwrap();
    // Unreachable hosts: process 1 cannot reach process 0 (nothing listens there).
    let hosts = dir.path().join("hosts");
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    std::fs::write(&hosts, format!("127.0.0.1:9\n127.0.0.1:{port}\n")).unwrap();
    let hosts_s = hosts.to_str().unwrap();
    let (code, err, took) = graph_error(&[
        "graph",
        "--rmat",
        "6",
        "--output",
        out_s,
        "--processes",
        "2",
        "--process",
        "1",
        "--hostfile",
        hosts_s,
        "--connect-timeout",
        "2",
    ]);
    assert_ne!(code, 0);
    assert!(took < Duration::from_secs(15), "{took:?}");
    assert!(
        err.contains("did not all connect within 2 s") && err.contains("127.0.0.1:9"),
        "{err}"
    );
    // The host file and the process count disagree.
    let (code, err, _) = graph_error(&[
        "graph",
        "--rmat",
        "6",
        "--output",
        out_s,
        "--processes",
        "3",
        "--hostfile",
        hosts_s,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("names 2 processes but the job has 3"), "{err}");
    // A host file line that is not host:port.
    std::fs::write(&hosts, "127.0.0.1:9\nlocalhost\n").unwrap();
    let (code, err, _) = graph_error(&[
        "graph",
        "--rmat",
        "6",
        "--output",
        out_s,
        "--processes",
        "2",
        "--hostfile",
        hosts_s,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("hosts:2") && err.contains("host:port"),
        "{err}"
    );
    // An edge list with a bad line names it.
    let edges = dir.path().join("edges.txt");
    std::fs::write(&edges, "# comment\n1 2\n2 three\n").unwrap();
    let (code, err, _) = graph_error(&[
        "graph",
        "--edges",
        edges.to_str().unwrap(),
        "--output",
        out_s,
        "--workers",
        "2",
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("edges.txt:3"), "{err}");
    // A corrupt BVGraph.
    let base = dir.path().join("g");
    std::fs::write(
        base.with_extension("properties"),
        "nodes=100\narcs=1000\ncompressionflags=\n",
    )
    .unwrap();
    std::fs::write(base.with_extension("graph"), [0xffu8; 16]).unwrap();
    let (code, err, _) = graph_error(&[
        "graph",
        "--bvgraph",
        base.to_str().unwrap(),
        "--output",
        out_s,
        "--workers",
        "2",
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("g.") && (err.contains("corrupt") || err.contains("cannot load")),
        "{err}"
    );
    // A connect timeout no duration can hold.
    let (code, err, _) = graph_error(&[
        "graph",
        "--rmat",
        "6",
        "--output",
        out_s,
        "--workers",
        "1",
        "--connect-timeout",
        "1e30",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--connect-timeout"), "{err}");
    assert!(!out.exists());
}

#[test]
fn processes_that_disagree_on_the_input_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = hostfile(dir.path(), 2);
    let out = dir.path().join("o.tsv");
    let out_s = out.to_str().unwrap();
    let p0 = spawn(
        &[
            "graph",
            "--rmat",
            "8",
            "--rmat-seed",
            "1",
            "--output",
            out_s,
        ],
        2,
        0,
        &hosts,
    );
    let p1 = spawn(
        &[
            "graph",
            "--rmat",
            "8",
            "--rmat-seed",
            "2",
            "--output",
            out_s,
        ],
        2,
        1,
        &hosts,
    );
    for p in [p0, p1] {
        let o = p.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(2));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("disagree on the graph"), "{err}");
    }
    assert!(!out.exists());
}
