//! `rankd eval-letor --model gbdt` and `--import` as a user runs them (issue 15): the same
//! seed gives the same tree model file, a tree model loads back as a reranker, an imported
//! LightGBM model scores the test file exactly as LightGBM's own predictions do (through
//! the same metric code), and bad tree options are exit code 2 naming the option.

use std::path::Path;
use std::process::Output;

use rankd::rerank::Reranker;

use crate::util::{gbdt_fixtures, rankd, Lcg};

/// 40 queries of 8 rows, 3 features, graded labels from the features plus noise.
fn write_letor(path: &Path, seed: u64) {
    let mut text = String::new();
    let mut rng = Lcg(seed);
    let mut next = || rng.unit();
    for q in 0..40 {
        for _ in 0..8 {
            let (a, b, c) = (next(), next(), next());
            let signal = 2.0 * a + b * c + 0.3 * next();
            let label = (signal.floor() as i32).clamp(0, 2);
            text.push_str(&format!("{label} qid:{q} 1:{a:.4} 2:{b:.4} 3:{c:.4}\n"));
        }
    }
    std::fs::write(path, text).unwrap();
}

fn json_of(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "rankd failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn trees_train_save_and_reload() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = (dir.path().join("train.svm"), dir.path().join("test.svm"));
    write_letor(&train, 1);
    write_letor(&test, 2);
    let run = |out: &Path, objective: &str| {
        json_of(&rankd(&[
            "eval-letor",
            "--train",
            train.to_str().unwrap(),
            "--test",
            test.to_str().unwrap(),
            "--model",
            "gbdt",
            "--objective",
            objective,
            "--trees",
            "20",
            "--leaves",
            "7",
            "--min-data-in-leaf",
            "5",
            "--row-fraction",
            "0.8",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ]))
    };
    for objective in ["lambda-ndcg", "lambda-ap", "stable-ap"] {
        let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
        let first = run(&a, objective);
        let second = run(&b, objective);
        assert_eq!(first["model"], "gbdt");
        assert_eq!(
            first["id"], second["id"],
            "{objective}: same seed, same model"
        );
        assert!(first["test"]["ndcg@10"].as_f64().unwrap() > 0.7, "{first}");
        let model = Reranker::load(&a).unwrap();
        assert_eq!(model.kind(), "gbdt");
        assert_eq!(model.training.epochs_run, 20);
        assert_eq!(
            serde_json::to_value(model.training.objective.kind()).unwrap(),
            objective
        );
    }
}

/// An imported LightGBM model, run through `--import`, gets the metrics that LightGBM's own
/// predictions of the same rows get through `--scores`.
#[test]
fn imported_model_scores_like_its_library() {
    let dir = tempfile::tempdir().unwrap();
    // The fixture's rows without NaN (LETOR files have none), as a LETOR file of 10-row
    // queries with made-up labels, and LightGBM's scores of those rows.
    let rows = std::fs::read_to_string(gbdt_fixtures().join("lgb_none_unnamed.rows.tsv")).unwrap();
    let scores =
        std::fs::read_to_string(gbdt_fixtures().join("lgb_none_unnamed.scores.txt")).unwrap();
    let (mut letor, mut kept_scores) = (String::new(), String::new());
    let mut n = 0;
    for (row, score) in rows.lines().zip(scores.lines()) {
        if row.contains("nan") {
            continue;
        }
        let values: Vec<&str> = row.split('\t').collect();
        let features: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(i, v)| format!("{}:{v}", i + 1))
            .collect();
        letor.push_str(&format!(
            "{} qid:{} {}\n",
            n % 3,
            n / 10,
            features.join(" ")
        ));
        kept_scores.push_str(score);
        kept_scores.push('\n');
        n += 1;
    }
    let n = n - n % 10;
    let letor: String = letor.lines().take(n).map(|l| format!("{l}\n")).collect();
    let kept: String = kept_scores
        .lines()
        .take(n)
        .map(|l| format!("{l}\n"))
        .collect();
    let (test, lib_scores) = (dir.path().join("t.svm"), dir.path().join("s.txt"));
    std::fs::write(&test, letor).unwrap();
    std::fs::write(&lib_scores, kept).unwrap();
    let model = gbdt_fixtures().join("lgb_none_unnamed.txt");
    let imported = json_of(&rankd(&[
        "eval-letor",
        "--test",
        test.to_str().unwrap(),
        "--import",
        model.to_str().unwrap(),
        "--json",
    ]));
    let library = json_of(&rankd(&[
        "eval-letor",
        "--test",
        test.to_str().unwrap(),
        "--scores",
        lib_scores.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(imported["library"], "lightgbm");
    assert_eq!(imported["test"], library["test"]);
}

#[test]
fn bad_tree_options_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let train = dir.path().join("train.svm");
    write_letor(&train, 3);
    let out = rankd(&[
        "eval-letor",
        "--train",
        train.to_str().unwrap(),
        "--test",
        train.to_str().unwrap(),
        "--model",
        "gbdt",
        "--max-bins",
        "300",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--max-bins must be in 2..=255, got 300"),
        "{err}"
    );
    let out = rankd(&[
        "eval-letor",
        "--train",
        train.to_str().unwrap(),
        "--test",
        train.to_str().unwrap(),
        "--model",
        "gbdt",
        "--objective",
        "ranknet",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("objective ranknet does not train trees"),
        "{err}"
    );
    let out = rankd(&["eval-letor", "--test", "x", "--model", "forest"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("[possible values: linear, mlp, gbdt]"),
        "{err}"
    );
}
