//! One policy everywhere: `GET /search`, `rankd eval` and `POST /admin/evaluate` rank through
//! the same engine, so the same request gives the same ranking (first phase, boosted and
//! reranked) and the same scores.

use std::collections::BTreeMap;

use crate::util::*;

const QUERIES: &[(&str, &str)] = &[
    ("q1", "vector iterator"),
    ("q2", "thread basics"),
    ("q3", "parser notes matrix"),
];

/// The hits of one `/search` request, in rank order, with their scores.
fn search(base: &str, params: &str, q: &str) -> Vec<(String, f64)> {
    let a = get(
        &format!("{base}/search?q={}&{params}", q.replace(' ', "+")),
        None,
    );
    assert_eq!(a.status, 200, "{params}: {}", a.body);
    hit_scores(&a.body)
}

/// `rankd eval` over the queries with `args`: its run (per query, in rank order) and report.
fn eval(
    dir: &std::path::Path,
    data: &std::path::Path,
    args: &[&str],
) -> (BTreeMap<String, Vec<(String, f64)>>, serde_json::Value) {
    let queries = dir.join("q.txt");
    let qrels = dir.join("qrels.txt");
    let run = dir.join("run.trec");
    let mut all = vec![
        "eval",
        "--queries",
        queries.to_str().unwrap(),
        "--qrels",
        qrels.to_str().unwrap(),
        "--run",
        run.to_str().unwrap(),
        "--json",
        "--data-dir",
        data.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let out = rankd_ok(all);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut ranked: BTreeMap<String, Vec<(usize, String, f64)>> = BTreeMap::new();
    for line in std::fs::read_to_string(&run).unwrap().lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        ranked.entry(f[0].to_string()).or_default().push((
            f[3].parse().unwrap(),
            f[2].to_string(),
            f[4].parse().unwrap(),
        ));
    }
    let runs = ranked
        .into_iter()
        .map(|(q, mut hits)| {
            hits.sort_by_key(|h| h.0);
            (q, hits.into_iter().map(|(_, id, s)| (id, s)).collect())
        })
        .collect();
    (runs, report)
}

fn same(a: &[(String, f64)], b: &[(String, f64)], what: &str) {
    assert_eq!(
        a.iter().map(|h| &h.0).collect::<Vec<_>>(),
        b.iter().map(|h| &h.0).collect::<Vec<_>>(),
        "{what}: different rankings"
    );
    for (x, y) in a.iter().zip(b) {
        assert!(
            (x.1 - y.1).abs() <= 1e-5 * x.1.abs().max(1.0),
            "{what}: {x:?} vs {y:?}"
        );
    }
}

#[test]
fn search_eval_and_admin_evaluate_rank_alike() {
    let dir = tempfile::tempdir().unwrap();
    let docs = topic_corpus(true);
    let data = ingest(
        dir.path(),
        &docs.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    rankd_ok(["graph", "--json", "--data-dir", data.to_str().unwrap()]);
    // Judgments: for each query, the documents whose title holds its first word.
    let mut qrels = String::new();
    let mut lines = String::new();
    for (qid, text) in QUERIES {
        lines.push_str(&format!("{qid} {text}\n"));
        let word = text.split(' ').next().unwrap();
        for (i, d) in docs.iter().enumerate() {
            let grade = i32::from(d.contains(&format!("\"title\":\"{word}")));
            qrels.push_str(&format!("{qid} 0 d{i} {grade}\n"));
        }
    }
    std::fs::write(dir.path().join("q.txt"), &lines).unwrap();
    std::fs::write(dir.path().join("qrels.txt"), &qrels).unwrap();
    let db = fresh_database(dir.path());
    let server = start(&data, &db, Some(TOKEN));
    let b = &server.base;
    let t = Some(TOKEN);
    assert_eq!(
        post_text(&format!("{b}/admin/judgments/qrels"), t, &qrels).status,
        200
    );
    assert_eq!(
        post_text(&format!("{b}/admin/queries"), t, &lines).status,
        200
    );

    for model in ["bm25f", "lm", "bm25prox"] {
        let (runs, report) = eval(dir.path(), &data, &["--model", model, "--depth", "20"]);
        for (qid, text) in QUERIES {
            let hits = search(b, &format!("model={model}&k=20&rerank=false"), text);
            same(&hits, &runs[*qid], &format!("{model} {qid}"));
        }
        let admin = post_json(
            &format!("{b}/admin/evaluate"),
            t,
            &format!(r#"{{"model":"{model}","depth":20}}"#),
        );
        assert_eq!(admin.status, 200, "{}", admin.body);
        for metric in ["map", "ndcg@10", "mrr"] {
            let (x, y) = (
                admin.body[metric].as_f64().unwrap(),
                report[metric].as_f64().unwrap(),
            );
            assert!(
                (x - y).abs() < 1e-12,
                "{model} {metric}: admin {x}, eval {y}"
            );
        }
    }

    // The boost re-sorts the same window in both.
    let (runs, _) = eval(
        dir.path(),
        &data,
        &[
            "--model",
            "bm25f",
            "--boost-pagerank",
            "0.5",
            "--window",
            "15",
        ],
    );
    for (qid, text) in QUERIES {
        let hits = search(b, "boost=pagerank&boost_weight=0.5&window=15&k=15", text);
        same(&hits, &runs[*qid], &format!("boost {qid}"));
    }

    // Reranked: a model trained on these judgments, activated, against `rankd eval --rerank`.
    let (q, r, m) = (
        dir.path().join("q.txt"),
        dir.path().join("qrels.txt"),
        dir.path().join("m.json"),
    );
    let files = [&q, &r, &m, &data].map(|p| p.to_str().unwrap());
    rankd_ok([
        "train",
        "--queries",
        files[0],
        "--qrels",
        files[1],
        "--epochs",
        "5",
        "--json",
        "--out",
        files[2],
        "--data-dir",
        files[3],
    ]);
    let model: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("m.json")).unwrap()).unwrap();
    let id = model["id"].as_str().unwrap().to_string();
    std::fs::create_dir_all(data.join("models")).unwrap();
    std::fs::copy(
        dir.path().join("m.json"),
        data.join(format!("models/{id}.json")),
    )
    .unwrap();
    drop(server);
    let server = start(&data, &db, Some(TOKEN));
    let b = &server.base;
    let a = post_json(&format!("{b}/admin/models/{id}/activate"), t, "{}");
    assert_eq!(a.status, 200, "{}", a.body);
    let m = dir.path().join("m.json");
    let (runs, _) = eval(
        dir.path(),
        &data,
        &[
            "--model",
            "bm25f",
            "--rerank",
            m.to_str().unwrap(),
            "--window",
            "20",
        ],
    );
    for (qid, text) in QUERIES {
        let hits = search(b, "window=20&k=20", text);
        same(&hits, &runs[*qid], &format!("rerank {qid}"));
    }
}

/// A query the engine refuses (here: over Lucene's 1024-term limit) is reported and scored 0
/// by `rankd eval`, not the end of the run; `--strict` stops at it, naming the query, as bad
/// input (exit 2).
#[test]
fn eval_reports_a_query_it_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    let data = ingest_topics(dir.path(), false);
    let long: String = (0..1025).map(|i| format!("w{i} ")).collect();
    std::fs::write(
        dir.path().join("q.txt"),
        format!("q1 vector basics\nq2 {long}\n"),
    )
    .unwrap();
    std::fs::write(dir.path().join("qrels.txt"), "q1 0 d0 1\nq2 0 d1 1\n").unwrap();
    let (runs, report) = eval(dir.path(), &data, &["--model", "bm25f"]);
    assert_eq!(runs.keys().collect::<Vec<_>>(), ["q1"]);
    assert_eq!(report["queries"], 2, "{report}");
    let failed = report["failed_queries"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{report}");
    assert_eq!(failed[0]["qid"], "q2");
    assert!(
        failed[0]["error"]
            .as_str()
            .unwrap()
            .contains("1025 distinct terms"),
        "{report}"
    );
    // q2 counts, with AP 0: the mean is half of q1's AP, which finds its document.
    let map = report["map"].as_f64().unwrap();
    assert!(map > 0.0 && map <= 0.5, "{report}");
    let strict = rankd_command()
        .args(["eval", "--strict", "--model", "bm25f", "--queries"])
        .arg(dir.path().join("q.txt"))
        .arg("--qrels")
        .arg(dir.path().join("qrels.txt"))
        .arg("--data-dir")
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(strict.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&strict.stderr);
    assert!(
        stderr.contains("query q2") && stderr.contains("1025"),
        "{stderr}"
    );
}

/// `rankd eval` refuses what `/search` refuses, in the same words naming the parameter, before
/// it runs a query (exit 2); what it needs from the index (link scores for a boost) is refused
/// at the first query, as a search is.
#[test]
fn eval_refuses_what_search_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let data = ingest_topics(dir.path(), false);
    std::fs::write(dir.path().join("q.txt"), "q1 vector basics\n").unwrap();
    std::fs::write(dir.path().join("qrels.txt"), "q1 0 d0 1\n").unwrap();
    let server = start(&data, &fresh_database(dir.path()), None);
    for (args, params, says) in [
        (
            // An evaluation collapses nothing; a search collapses by page unless told not to.
            &["--window", "50"][..],
            "window=50&rerank=false&collapse=none",
            "window sets the rerank, boost or collapse window",
        ),
        (
            &["--inputs", "bm25,lm"],
            "inputs=bm25,lm",
            "inputs applies to model=fusion",
        ),
        (
            &["--field", "colour"],
            "field=colour",
            "unknown field `colour`",
        ),
        (
            &["--model", "fusion", "--inputs", "bm25,lm"],
            "model=fusion&inputs=bm25,lm",
            "model=fusion needs fusion=",
        ),
        (
            &["--boost-pagerank", "1"],
            "boost=pagerank&boost_weight=1",
            "no link scores for this index",
        ),
    ] {
        let searched = get(&format!("{}/search?q=vector&{params}", server.base), None);
        assert_eq!(searched.status, 400, "{params}: {}", searched.body);
        let message = searched.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{params}: {message}");
        let out = rankd_command()
            .args(["eval", "--queries"])
            .arg(dir.path().join("q.txt"))
            .arg("--qrels")
            .arg(dir.path().join("qrels.txt"))
            .arg("--data-dir")
            .arg(&data)
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let field = searched.body["error"]["field"].as_str().unwrap();
        assert!(
            stderr.contains(&format!("{field}: {message}")),
            "{args:?}: {stderr}"
        );
    }
}
