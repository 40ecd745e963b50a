//! Training on judgments over the index, as a user runs it: `rankd features` logs the
//! windows, `rankd train --queries --qrels --activate` trains and activates, `rankd eval
//! --rerank` uses the model, `rankd cv` cross-validates; bad judgments are exit code 2.

use std::path::Path;
use std::process::Output;

use crate::util::{numbers, rankd};

fn ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

const WORDS: &[&str] = &[
    "alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "lambda", "theta", "zeta",
];

/// 80 linked documents; queries "w1 w2" whose relevant documents have w1 in the title.
fn setup(dir: &Path) -> (String, String, String) {
    let mut docs = String::new();
    for i in 0..80 {
        let w = |k: usize| WORDS[(i * 3 + k * 7) % WORDS.len()];
        docs.push_str(
            &serde_json::json!({
                "id": format!("d{i}"),
                "url": format!("https://example.org/{}/{i}", w(1)),
                "title": format!("{} {}", w(0), w(4)),
                "body": (0..(8 + i % 9)).map(w).collect::<Vec<_>>().join(" "),
                "links": [format!("d{}", (i + 3) % 80)],
            })
            .to_string(),
        );
        docs.push('\n');
    }
    let (mut queries, mut qrels) = (String::new(), String::new());
    for q in 0..10 {
        let (a, b) = (WORDS[q], WORDS[(q + 3) % WORDS.len()]);
        queries.push_str(&format!("q{q} {a} {b}\n"));
        for i in 0..80 {
            let title0 = WORDS[(i * 3) % WORDS.len()];
            qrels.push_str(&format!("q{q} 0 d{i} {}\n", i32::from(title0 == a)));
        }
    }
    let data = dir.join("data");
    let files = [
        ("docs.jsonl", docs),
        ("q.txt", queries),
        ("qrels.txt", qrels),
    ];
    for (name, text) in &files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let s = |p: &Path| p.to_str().unwrap().to_string();
    ok(rankd(&[
        "ingest",
        "--format",
        "jsonl",
        "--input",
        &s(&dir.join("docs.jsonl")),
        "--data-dir",
        &s(&data),
    ]));
    ok(rankd(&["graph", "--data-dir", &s(&data)]));
    (s(&data), s(&dir.join("q.txt")), s(&dir.join("qrels.txt")))
}

/// `rankd eval --json` of BM25F reranked by the model file.
fn eval_reranked(data: &str, q: &str, qrels: &str, model: &Path) -> serde_json::Value {
    let model = model.to_str().unwrap();
    let out = ok(on_index(
        "eval",
        data,
        q,
        qrels,
        &["--model", "bm25f", "--rerank", model, "--json"],
    ));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The `qid text` lines of a queries file, by query id.
fn query_texts(path: &str) -> std::collections::HashMap<String, String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let (id, text) = l.split_once(' ').unwrap();
            (id.to_string(), text.to_string())
        })
        .collect()
}

/// `rankd eval --json` of BM25F alone.
fn eval_first_phase(data: &str, q: &str, qrels: &str) -> serde_json::Value {
    let out = ok(on_index(
        "eval",
        data,
        q,
        qrels,
        &["--model", "bm25f", "--json"],
    ));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `rankd CMD --queries Q --qrels QRELS --data-dir DATA`, then `extra`.
fn on_index(cmd: &str, data: &str, q: &str, qrels: &str, extra: &[&str]) -> Output {
    let mut args = vec![cmd, "--queries", q, "--qrels", qrels, "--data-dir", data];
    args.extend_from_slice(extra);
    rankd(&args)
}

/// `rankd cv --json` with 2 folds and 5 epochs, plus `extra` flags.
fn cv_json(data: &str, q: &str, qrels: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["--folds", "2", "--epochs", "5", "--json"];
    args.extend_from_slice(extra);
    serde_json::from_slice(&ok(on_index("cv", data, q, qrels, &args)).stdout).unwrap()
}

#[test]
fn train_on_the_index_activate_and_evaluate() {
    let dir = tempfile::tempdir().unwrap();
    let (data, q, qrels) = setup(dir.path());
    let svm = dir.path().join("w.svm");
    let out = ok(on_index(
        "features",
        &data,
        &q,
        &qrels,
        &["--out", svm.to_str().unwrap(), "--json"],
    ));
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["queries"], 10);
    assert!(std::fs::read_to_string(&svm).unwrap().contains("qid:10"));

    let model = dir.path().join("m.json");
    ok(on_index(
        "train",
        &data,
        &q,
        &qrels,
        &[
            "--out",
            model.to_str().unwrap(),
            "--model",
            "linear",
            "--epochs",
            "20",
            "--activate",
        ],
    ));
    let active = std::fs::read_to_string(Path::new(&data).join("models/ACTIVE")).unwrap();
    assert!(active.ends_with(".json"));
    let report = eval_reranked(&data, &q, &qrels, &model);
    assert_eq!(report["queries"], 10);
    assert!(report["map"].as_f64().unwrap() > 0.0);

    // `--run` writes the cross-validated reranked run: scored again from the file, it has
    // the MAP cv reports.
    let run_path = dir.path().join("cv.run");
    let cv = cv_json(&data, &q, &qrels, &["--run", run_path.to_str().unwrap()]);
    assert!(cv["significance"]["map"]["p_value"].as_f64().unwrap() > 0.0);
    let run = rankd::eval::trec::read_run(&run_path).unwrap();
    assert_eq!(run.num_queries(), 10);
    let judged = rankd::eval::trec::read_qrels(Path::new(&qrels)).unwrap();
    let options = rankd::eval::EvalOptions {
        cutoffs: vec![10],
        complete: true,
        ..Default::default()
    };
    let rescored = rankd::eval::evaluate(&run, &judged, &options).unwrap();
    let map = cv["reranked"]["map"].as_f64().unwrap();
    assert!(
        (rescored.means.get("map").unwrap() - map).abs() < 1e-9,
        "{map}"
    );

    // With --select, every fold reports its own choice, starting from the first phase.
    let select = ["--model", "linear", "--select", "--select-k", "1,2"];
    let cv = cv_json(&data, &q, &qrels, &select);
    assert_eq!(cv["selection_grid"]["rule"], "one-se");
    for fold in cv["folds"].as_array().unwrap() {
        let selection = &fold["selection"];
        assert_eq!(selection["features"][0], "first_phase.score");
        assert_eq!(selection["candidates"].as_array().unwrap().len(), 2);
    }
    assert!(cv["significance"]["map"]["p_value"].as_f64().unwrap() > 0.0);
}

#[test]
fn bad_judgments_are_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let (data, q, _) = setup(dir.path());
    // Judgments of a query the queries file does not have.
    let bad = dir.path().join("bad.qrels");
    std::fs::write(&bad, "q99 0 d1 1\n").unwrap();
    let out = on_index(
        "train",
        &data,
        &q,
        bad.to_str().unwrap(),
        &["--out", "/dev/null"],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("q99"));
    // A window larger than the limit.
    let out = on_index(
        "cv",
        &data,
        &q,
        bad.to_str().unwrap(),
        &["--window", "5000"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("window"));
    // A model file that is not JSON.
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "{\"format\": \"rankd-reranker\", ").unwrap();
    let out = on_index(
        "eval",
        &data,
        &q,
        bad.to_str().unwrap(),
        &["--rerank", junk.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("truncated"));
}

/// The network and normalisation of a model file (what training learned), without the
/// metadata that names the data source.
fn learned(path: &Path) -> (serde_json::Value, serde_json::Value) {
    let model: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    (model["network"].clone(), model["normalization"].clone())
}

/// INTERFACE.md's `--judgments FILE` (JSON lines) and `--from-db` train on the same judgments
/// as `--queries/--qrels` and so, with the same seed, learn the same model.
#[test]
fn judgments_file_and_database_train_the_same_model_as_qrels() {
    let dir = tempfile::tempdir().unwrap();
    let (data, q, qrels) = setup(dir.path());
    let train = |source: &[&str], out: &Path| {
        let mut args = vec!["train"];
        args.extend_from_slice(source);
        let out_s = out.to_str().unwrap();
        args.extend_from_slice(&["--data-dir", &data, "--out", out_s, "--model", "linear"]);
        args.extend_from_slice(&["--epochs", "10", "--seed", "7"]);
        ok(rankd(&args));
    };
    let from_qrels = dir.path().join("qrels-model.json");
    train(&["--queries", &q, "--qrels", &qrels], &from_qrels);

    // The same judgments as JSON lines, a query's text on its first line only.
    let texts = query_texts(&q);
    let mut lines = String::new();
    let mut seen = std::collections::HashSet::new();
    let mut stored = Vec::new();
    for l in std::fs::read_to_string(&qrels).unwrap().lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (qid, doc, grade) = (f[0], f[2], f[3].parse::<i32>().unwrap());
        let mut obj = serde_json::json!({"query_id": qid, "doc_id": doc, "grade": grade});
        if seen.insert(qid.to_string()) {
            obj["query"] = texts[qid].clone().into();
        }
        lines.push_str(&format!("{obj}\n"));
        stored.push(rankd::db::judgments::Judgment {
            query_id: qid.into(),
            doc_id: doc.into(),
            grade,
            source: "test".into(),
        });
    }
    let jsonl = dir.path().join("judgments.jsonl");
    std::fs::write(&jsonl, lines).unwrap();
    let from_jsonl = dir.path().join("jsonl-model.json");
    train(&["--judgments", jsonl.to_str().unwrap()], &from_jsonl);
    assert_eq!(learned(&from_jsonl), learned(&from_qrels));

    // The same judgments in the data directory's SQLite database.
    let url = rankd::db::default_url(Path::new(&data));
    let queries: Vec<(String, String)> = texts.into_iter().collect();
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let db = rankd::db::Db::open(&url).await.unwrap();
        db.store_judgments(&queries, &stored).await.unwrap();
    });
    let from_db = dir.path().join("db-model.json");
    train(&["--from-db"], &from_db);
    assert_eq!(learned(&from_db), learned(&from_qrels));
}

#[test]
fn bad_judgment_lines_are_exit_2_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let (data, _, _) = setup(dir.path());
    let cases = [
        ("{\"query_id\":\"q1\",\"doc_id\":\"d1\",\"grade\":1}\n", "line 1", "give its text"),
        (
            "{\"query_id\":\"q1\",\"query\":\"alpha\",\"doc_id\":\"d1\",\"grade\":1}\n\n{\"query_id\":\"q1\",\"doc_id\":\"d1\",\"grade\":0}\n",
            "line 3",
            "second time",
        ),
        (
            "{\"query_id\":\"q1\",\"query\":\"alpha\",\"doc_id\":\"d1\",\"grade\":1,\"weight\":2}\n",
            "line 1",
            "unknown field",
        ),
        ("{\"query_id\":\"q1\",\"query\":\"alpha\",\"doc_id\":\"d1\",\"grade\":\"x\"}\n", "line 1", "invalid type"),
        ("{\"query_id\": \"q1\", \n", "line 1", "EOF"),
        ("\n\n", "judgments.jsonl", "no judgments"),
    ];
    for (text, place, what) in cases {
        let file = dir.path().join("judgments.jsonl");
        std::fs::write(&file, text).unwrap();
        let out = rankd(&[
            "train",
            "--judgments",
            file.to_str().unwrap(),
            "--data-dir",
            &data,
            "--out",
            dir.path().join("m.json").to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text:?}: {err}");
        assert!(err.contains(place) && err.contains(what), "{text:?}: {err}");
        assert!(
            !dir.path().join("m.json").exists(),
            "no model written for {text:?}"
        );
    }
    // An empty database: a clear error, not an empty model.
    let out = rankd(&[
        "train",
        "--from-db",
        "--data-dir",
        &data,
        "--out",
        "/dev/null",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no judgments"));
    // Two sources at once is a usage error.
    let out = rankd(&["train", "--from-db", "--letor", "x", "--out", "/dev/null"]);
    assert_eq!(out.status.code(), Some(2));
}

/// By default a model trains on every feature but RM3 (which serving then skips); `--features`
/// picks columns by name, RM3 included, and such a model reranks with RM3 computed.
#[test]
fn default_training_leaves_rm3_out_and_features_selects_columns() {
    let dir = tempfile::tempdir().unwrap();
    let (data, q, qrels) = setup(dir.path());
    let names = |path: &Path| -> Vec<String> {
        let model: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        serde_json::from_value(model["feature_names"].clone()).unwrap()
    };
    let default = dir.path().join("default.json");
    let train = |extra: &[&str]| on_index("train", &data, &q, &qrels, extra);
    ok(train(&[
        "--epochs",
        "5",
        "--out",
        default.to_str().unwrap(),
    ]));
    let default_names = names(&default);
    assert!(default_names.len() > 25);
    assert!(default_names.iter().all(|n| !n.starts_with("rm3.")));
    assert!(default_names.iter().any(|n| n == "first_phase.score"));

    let chosen = dir.path().join("chosen.json");
    ok(train(&[
        "--epochs",
        "5",
        "--out",
        chosen.to_str().unwrap(),
        "--features",
        "first_phase.score,rm3.bm25f",
    ]));
    assert_eq!(names(&chosen), ["first_phase.score", "rm3.bm25f"]);
    let report = eval_reranked(&data, &q, &qrels, &chosen);
    assert!(report["map"].as_f64().unwrap() > 0.0);

    // Without --out the model goes to the data directory's model directory, named by its id.
    let summary: serde_json::Value =
        serde_json::from_slice(&ok(train(&["--epochs", "5", "--json"])).stdout).unwrap();
    let id = summary["id"].as_str().unwrap();
    let stored = Path::new(&data).join("models").join(format!("{id}.json"));
    assert_eq!(summary["model"], stored.to_str().unwrap());
    assert_eq!(names(&stored), default_names);

    let out = train(&["--out", "/dev/null", "--features", "first_phase.score,nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`nope` is not a feature"));
}

/// `--select` screens the training features and keeps `first_phase.score` plus a prefix of
/// the screening order; the model reads exactly the selected columns and says why.
#[test]
fn select_keeps_the_anchor_and_a_screened_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let (data, q, qrels) = setup(dir.path());
    let out_path = dir.path().join("selected.json");
    let out = ok(on_index(
        "train",
        &data,
        &q,
        &qrels,
        &[
            "--model",
            "linear",
            "--epochs",
            "5",
            "--select",
            "--select-k",
            "1,100",
            "--select-weight-decay",
            "0.00004,0.01",
            "--json",
            "--out",
            out_path.to_str().unwrap(),
        ],
    ));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let selection = &summary["selection"];
    let features: Vec<String> = serde_json::from_value(selection["features"].clone()).unwrap();
    let screened: Vec<String> = selection["screened"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["feature"].as_str().unwrap().to_string())
        .filter(|f| f != "first_phase.score")
        .collect();
    assert_eq!(features[0], "first_phase.score");
    assert_eq!(features[1..], screened[..features.len() - 1]);
    assert_eq!(selection["candidates"].as_array().unwrap().len(), 4);
    assert_eq!(selection["rule"], "one-se");
    let constant: Vec<String> = serde_json::from_value(selection["constant"].clone()).unwrap();
    assert!(constant.iter().any(|f| f == "query.length"), "{constant:?}");
    let model: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out_path).unwrap()).unwrap();
    assert_eq!(model["feature_names"], selection["features"]);
}

/// `--model gbdt` trains trees on the index through the same path as the other models:
/// `rankd train` writes a tree model that `rankd eval --rerank` serves and that reranks
/// better than the first phase here (the title word decides relevance), and `rankd cv`
/// cross-validates trees; `--select` is refused with trees, naming the flag.
#[test]
fn trees_train_on_the_index_and_cross_validate() {
    let dir = tempfile::tempdir().unwrap();
    let (data, q, qrels) = setup(dir.path());
    let model = dir.path().join("trees.json");
    let trees = [
        "--model",
        "gbdt",
        "--trees",
        "30",
        "--leaves",
        "4",
        "--min-data-in-leaf",
        "3",
    ];
    let mut args = vec!["--out", model.to_str().unwrap()];
    args.extend_from_slice(&trees);
    ok(on_index("train", &data, &q, &qrels, &args));
    let m = rankd::rerank::Reranker::load(&model).unwrap();
    assert_eq!(m.kind(), "gbdt");
    assert_eq!(m.training.epochs_run, 30);
    let reranked = eval_reranked(&data, &q, &qrels, &model);
    let first = eval_first_phase(&data, &q, &qrels);
    assert!(
        reranked["map"].as_f64().unwrap() > first["map"].as_f64().unwrap(),
        "trees {reranked} vs first phase {first}"
    );

    let cv = cv_json(&data, &q, &qrels, &trees);
    assert_eq!(cv["folds"].as_array().unwrap().len(), 2);
    assert!(cv["reranked"]["map"].as_f64().unwrap() > 0.0, "{cv}");

    let mut args = vec!["--select"];
    args.extend_from_slice(&trees);
    let out = on_index("train", &data, &q, &qrels, &args);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--select") && err.contains("gbdt"), "{err}");
}

/// `rankd train --activate` holds out the activation guard's queries: a model trained to put
/// the wrong documents first is stored but not activated, and `--force` activates it.
#[test]
fn activate_refuses_a_model_worse_than_the_first_phase() {
    let dir = tempfile::tempdir().unwrap();
    let data = crate::util::ingest_topics(dir.path(), false);
    let (rows, held) = crate::util::guard_judgments();
    let judgments = dir.path().join("judgments.jsonl");
    let lines: Vec<String> = rows.iter().map(|r| r.to_string()).collect();
    std::fs::write(&judgments, lines.join("\n")).unwrap();
    let train = |more: &[&str]| {
        let mut args = vec![
            "train",
            "--judgments",
            judgments.to_str().unwrap(),
            "--data-dir",
            data.to_str().unwrap(),
            "--model",
            "linear",
            "--epochs",
            "40",
            "--activate",
            "--json",
        ];
        args.extend(more);
        let out = ok(rankd(&args));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (v, String::from_utf8_lossy(&out.stderr).to_string())
    };
    let (v, log) = train(&[]);
    let refused = v["guard"]["refused"].as_str().unwrap();
    assert!(refused.contains("worse than the first phase"), "{refused}");
    assert_eq!(v["guard"]["classes"][0]["queries"], held);
    assert!(log.contains("not activated"), "{log}");
    assert_eq!(
        rankd::search::model::activation_request_id(&data).unwrap(),
        None
    );
    let model = v["model"].as_str().unwrap();
    assert!(Path::new(model).exists(), "stored inactive: {model}");

    let (v, log) = train(&["--force"]);
    assert!(v["guard"]["refused"].is_string());
    assert!(log.contains("activated with --force"), "{log}");
    assert_eq!(
        rankd::search::model::activation_request_id(&data).unwrap(),
        Some(v["id"].as_str().unwrap().to_string())
    );
}

/// Logs `sessions` first pages per query of `q` as a server would whose ranking is randomised:
/// 10 of BM25F's top 30 in a random order (the fixture's BM25F has no relevant document in its
/// top 10, so its own first page would draw no informative click), clicks drawn from a position-based model (examination 1/rank, a relevant document clicked
/// when examined, another one time in twenty). Returns the clicks logged.
fn log_clicks(data: &str, q: &str, qrels: &str, sessions: usize, dir: &Path) -> usize {
    use rand::{Rng, SeedableRng};
    let run = dir.join("bm25f.run");
    ok(on_index(
        "eval",
        data,
        q,
        qrels,
        &["--model", "bm25f", "--run", run.to_str().unwrap()],
    ));
    let mut ranked: std::collections::BTreeMap<String, Vec<(usize, String)>> = Default::default();
    for l in std::fs::read_to_string(&run).unwrap().lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        ranked
            .entry(f[0].to_string())
            .or_default()
            .push((f[3].parse().unwrap(), f[2].to_string()));
    }
    let relevant: std::collections::HashSet<(String, String)> = std::fs::read_to_string(qrels)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[3] != "0").then(|| (f[0].to_string(), f[2].to_string()))
        })
        .collect();
    let texts = query_texts(q);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let (mut impressions, mut events) = (Vec::new(), Vec::new());
    for (qid, docs) in &mut ranked {
        docs.sort();
        for s in 0..sessions {
            // In a random order: the position of a document varies, so the click model can
            // tell examination from attraction.
            let picked = rand::seq::index::sample(&mut rng, docs.len().min(30), 10).into_vec();
            let shown: Vec<&String> = picked.iter().map(|&i| &docs[i].1).collect();
            let query_id = format!("{qid}-{s}");
            impressions.push(rankd::db::events::Impression {
                query_id: query_id.clone(),
                created_at: now,
                query: texts[qid].clone(),
                model: "bm25f".into(),
                reranker: None,
                client_id: None,
                offset: 0,
                page_size: 10,
                shown: (1..).zip(&shown).map(|(k, d)| (d.to_string(), k)).collect(),
                interleaved: None,
            });
            for (k, d) in (1..).zip(&shown) {
                let p = if relevant.contains(&(qid.clone(), d.to_string())) {
                    1.0
                } else {
                    0.05
                };
                if rng.random::<f64>() < p / k as f64 {
                    events.push(rankd::db::events::Event {
                        action_name: "click".into(),
                        query_id: query_id.clone(),
                        object_id: Some(d.to_string()),
                        position: Some(k),
                        timestamp: now,
                        dwell_ms: None,
                        client_id: None,
                        attributes: None,
                    });
                }
            }
        }
    }
    let url = rankd::db::default_url(Path::new(data));
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let db = rankd::db::Db::open(&url).await.unwrap();
        db.store_impressions(&impressions).await.unwrap();
        db.store_events(&events).await.unwrap().unwrap();
    });
    events.len()
}

/// `rankd train --clicks --debias pairwise` trains trees by unbiased LambdaMART on the logged
/// pages (SPEC §11): the click biases it learns fall with rank, and the model ranks the
/// judged-relevant documents better than the logging ranker did. With a model that is not
/// trees it is exit 2 naming the model.
#[test]
fn train_from_logged_clicks_pairwise() {
    let dir = tempfile::tempdir().unwrap();
    let (data, q, qrels) = setup(dir.path());
    log_clicks(&data, &q, &qrels, 200, dir.path());
    let model = dir.path().join("pairwise.json");
    let train = |extra: &[&str]| {
        let mut args = vec![
            "train",
            "--clicks",
            "--data-dir",
            &data,
            "--debias",
            "pairwise",
        ];
        args.extend_from_slice(&["--seed", "7"]);
        args.extend_from_slice(extra);
        rankd(&args)
    };
    let linear = train(&["--model", "linear", "--out", "/dev/null"]);
    assert_eq!(linear.status.code(), Some(2));
    let said = String::from_utf8_lossy(&linear.stderr);
    assert!(
        said.contains("debias pairwise (unbiased LambdaMART) trains trees, not model linear"),
        "{said}"
    );

    let out = ok(train(&[
        "--model",
        "gbdt",
        "--json",
        "--out",
        model.to_str().unwrap(),
    ]));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["clicks"]["debias"], "pairwise", "{report}");
    assert!(
        report["objective"].to_string().contains("lambda-ndcg"),
        "{report}"
    );
    // Measured: 1, 0.803, 0.652, 0.685, 0.462, 0.450, 0.500, 0.555, 0.401, 0.452 (clicks
    // simulated with examination 1/rank; the learned t⁺ is its cube root at best, p = 2).
    let t_plus = numbers(&report["position_bias"]["t_plus"]);
    assert_eq!(t_plus[0], 1.0);
    assert!(t_plus[1] < 1.0 && t_plus[4] < t_plus[1], "t+ {t_plus:?}");
    let before = eval_first_phase(&data, &q, &qrels)["map"].as_f64().unwrap();
    let after = eval_reranked(&data, &q, &qrels, &model)["map"]
        .as_f64()
        .unwrap();
    // Measured: BM25F 0.148, the model from unbiased LambdaMART on the clicks 0.822.
    assert!(after > before + 0.2, "MAP {before} → {after}");
}

/// `rankd train --clicks` learns from the server's click log: propensities estimated from
/// the logged pages near the simulated 1/rank, and a model that ranks the judged-relevant
/// documents better than the logging ranker did; with `--judgments` beside it, both train.
/// Without a log it is exit 2 saying why.
#[test]
fn train_from_logged_clicks() {
    let dir = tempfile::tempdir().unwrap();
    let (data, q, qrels) = setup(dir.path());
    let none = rankd(&[
        "train",
        "--clicks",
        "--data-dir",
        &data,
        "--out",
        "/dev/null",
    ]);
    assert_eq!(none.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&none.stderr).contains("no logged first page"));

    let clicks = log_clicks(&data, &q, &qrels, 200, dir.path());
    let model = dir.path().join("clicks.json");
    let train = |extra: &[&str], out: &Path| -> serde_json::Value {
        let mut args = vec!["train", "--clicks", "--data-dir", &data, "--json"];
        args.extend_from_slice(&["--out", out.to_str().unwrap()]);
        if !extra.contains(&"--model") {
            args.extend_from_slice(&["--model", "linear"]);
        }
        args.extend_from_slice(&["--epochs", "30", "--seed", "7"]);
        args.extend_from_slice(extra);
        serde_json::from_slice(&ok(rankd(&args)).stdout).unwrap()
    };
    let report = train(&[], &model);
    let stats = &report["clicks"];
    assert_eq!(stats["clicks"], clicks, "{stats}");
    assert_eq!(stats["queries"], 10, "{stats}");
    assert_eq!(stats["pages"], 2000, "{stats}");

    // The server's `[events] max_training_pages`, from its configuration file or the
    // environment, bounds what the command reads, as it bounds the server's own training.
    let config = dir.path().join("rankd.toml");
    std::fs::write(&config, "[events]\nmax_training_pages = 500\n").unwrap();
    let bounded = |env: &[(&str, &str)]| {
        crate::util::rankd_command()
            .args(["train", "--clicks", "--data-dir", &data, "--json"])
            .args(["--model", "linear", "--epochs", "2", "--out"])
            .arg(dir.path().join("bounded.json"))
            .env("RANKD_LOG", "error")
            .envs(env.iter().copied())
            .output()
            .unwrap()
    };
    let from_file = bounded(&[("RANKD_CONFIG", config.to_str().unwrap())]);
    let report: serde_json::Value = serde_json::from_slice(&ok(from_file).stdout).unwrap();
    assert_eq!(report["clicks"]["pages"], 500, "{report}");
    let bad = bounded(&[("RANKD_EVENTS_MAX_TRAINING_PAGES", "0")]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("max_training_pages"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    let theta = numbers(&stats["propensities"]);
    assert_eq!(theta[0], 1.0);
    // Measured: 1, 0.502, 0.335, 0.277, 0.207, 0.161, 0.144, 0.131, 0.112, 0.116.
    for (k, t) in theta.iter().enumerate() {
        let truth = 1.0 / (k + 1) as f64;
        assert!((t - truth).abs() < 0.05, "rank {}: {t} vs {truth}", k + 1);
    }
    assert!(
        stats["pairs_at_several_ranks"].as_u64().unwrap() > 200,
        "{stats}"
    );
    let first_phase = eval_first_phase(&data, &q, &qrels);
    let reranked = eval_reranked(&data, &q, &qrels, &model);
    let (before, after) = (
        first_phase["map"].as_f64().unwrap(),
        reranked["map"].as_f64().unwrap(),
    );
    // Measured: BM25F 0.148; the default (graded click labels: each shown document's click
    // rate given examination) 0.626, from click-through rates (`--debias none`) 0.595; with
    // `--click-labels binary` (one group per clicked document) 0.533 and 0.313.
    assert!(after > before + 0.4, "MAP {before} → {after}");
    let map_of = |extra: &[&str]| {
        let out = dir.path().join("other.json");
        train(extra, &out);
        eval_reranked(&data, &q, &qrels, &out)["map"]
            .as_f64()
            .unwrap()
    };
    let naive = map_of(&["--debias", "none"]);
    assert!(
        after > naive + 0.02,
        "MAP with IPS {after}, without {naive}"
    );
    let binary = map_of(&["--click-labels", "binary"]);
    let binary_naive = map_of(&["--click-labels", "binary", "--debias", "none"]);
    assert!(
        after > binary + 0.05 && binary > binary_naive + 0.1,
        "MAP graded {after}, binary {binary}, binary without IPS {binary_naive}"
    );

    // Clicks and judgments together: both sources' groups train one model.
    let jsonl = dir.path().join("judgments.jsonl");
    std::fs::write(
        &jsonl,
        "{\"query_id\":\"j1\",\"query\":\"alpha beta\",\"doc_id\":\"d0\",\"grade\":1}\n\
         {\"query_id\":\"j1\",\"doc_id\":\"d1\",\"grade\":0}\n\
         {\"query_id\":\"j2\",\"query\":\"gamma\",\"doc_id\":\"d2\",\"grade\":1}\n",
    )
    .unwrap();
    let both = train(
        &["--judgments", jsonl.to_str().unwrap()],
        &dir.path().join("both.json"),
    );
    assert!(
        both["train_queries"].as_u64().unwrap() > report["train_queries"].as_u64().unwrap(),
        "{both}"
    );
}
