//! `rankd train` and `rankd eval-letor` as a user runs them: same seed → same model file,
//! bad input → exit code 2 with what and where, one-sided queries skipped and counted.

use std::path::Path;

use crate::util::{rankd, stderr, Lcg};

/// A small LETOR file with `qid:`: 30 queries of 6 rows, label from feature 1 plus noise,
/// query 0 all relevant and query 1 all non-relevant.
fn write_letor(path: &Path) {
    let mut text = String::new();
    let mut rng = Lcg(12345);
    let mut next = || rng.unit();
    for q in 0..30 {
        for _ in 0..6 {
            let (a, b, c) = (next(), next(), next());
            let label = match q {
                0 => 2,
                1 => 0,
                _ if a + 0.3 * b > 0.9 => 2,
                _ if a + 0.3 * b > 0.5 => 1,
                _ => 0,
            };
            text.push_str(&format!("{label} qid:{q} 1:{a:.4} 2:{b:.4} 3:{c:.4}\n"));
        }
    }
    std::fs::write(path, text).unwrap();
}

fn without_created_at(path: &Path) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("created_at");
    v
}

#[test]
fn same_seed_same_model_file() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("train.svm");
    write_letor(&data);
    let train = |out: &Path, seed: &str| {
        let o = rankd(&[
            "train",
            "--letor",
            data.to_str().unwrap(),
            "--model",
            "mlp",
            "--out",
            out.to_str().unwrap(),
            "--epochs",
            "5",
            "--seed",
            seed,
            "--json",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let (a, b, c) = (
        dir.path().join("a.json"),
        dir.path().join("b.json"),
        dir.path().join("c.json"),
    );
    let summary = train(&a, "7");
    train(&b, "7");
    train(&c, "8");
    assert_eq!(without_created_at(&a), without_created_at(&b));
    assert_ne!(without_created_at(&a)["id"], without_created_at(&c)["id"]);
    // One-sided queries (queries 0 and 1, and any random one) are counted, not learned from.
    let cov = &summary["coverage"];
    let skipped = cov["only_positives"].as_u64().unwrap() + cov["only_negatives"].as_u64().unwrap();
    let usable = cov["usable"].as_u64().unwrap();
    assert!(
        skipped >= 1 && usable >= 15 && usable + skipped == 24,
        "{cov}"
    );
    for epoch in summary["log"].as_array().unwrap() {
        assert_eq!(epoch["skipped_queries"].as_u64().unwrap(), skipped);
        assert!(epoch["train_loss"].as_f64().unwrap().is_finite());
    }
}

#[test]
fn group_file_that_does_not_add_up_is_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("train.svm");
    std::fs::write(&data, "1 1:0.5\n0 1:0.2\n2 1:0.9\n").unwrap();
    let groups = dir.path().join("groups");
    std::fs::write(&groups, "2\n2\n").unwrap();
    let o = rankd(&[
        "train",
        "--letor",
        data.to_str().unwrap(),
        "--letor-query",
        groups.to_str().unwrap(),
        "--out",
        dir.path().join("m.json").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let msg = stderr(&o);
    assert!(
        msg.contains("groups") && msg.contains('4') && msg.contains('3'),
        "{msg}"
    );
    assert!(!dir.path().join("m.json").exists());
}

#[test]
fn bad_tokens_and_bad_scores_are_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("bad.svm");
    std::fs::write(&data, "1 qid:1 1:0.5\n0 qid:1 1:abc\n").unwrap();
    let o = rankd(&[
        "eval-letor",
        "--train",
        data.to_str().unwrap(),
        "--test",
        data.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("bad.svm:2"), "{}", stderr(&o));

    let test = dir.path().join("test.svm");
    write_letor(&test);
    let scores = dir.path().join("scores.txt");
    for (content, expected) in [
        ("1\n2\n", "has 2 scores but the test file has 180 rows"),
        ("1\nNaN\n", "scores.txt:2"),
    ] {
        std::fs::write(&scores, content).unwrap();
        let o = rankd(&[
            "eval-letor",
            "--test",
            test.to_str().unwrap(),
            "--scores",
            scores.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(2));
        assert!(stderr(&o).contains(expected), "{}", stderr(&o));
    }
}

#[test]
fn eval_letor_trains_and_reports_json() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("train.svm");
    write_letor(&data);
    let model = dir.path().join("m.json");
    let o = rankd(&[
        "eval-letor",
        "--train",
        data.to_str().unwrap(),
        "--test",
        data.to_str().unwrap(),
        "--model",
        "linear",
        "--objective",
        "ranknet",
        "--epochs",
        "5",
        "--out",
        model.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for k in ["ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map"] {
        let m = v["test"][k].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&m), "{k} = {m}");
    }
    assert_eq!(v["model"], "linear");
    let loaded = rankd::rerank::Reranker::load(&model).unwrap();
    assert_eq!(loaded.id(), v["id"].as_str().unwrap());
}

/// SOPRC and row sampling from the command line: trains, reports both in the JSON and the
/// model file; out-of-range values are exit 2 naming the parameter.
#[test]
fn soprc_with_sampled_rows() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("train.svm");
    write_letor(&data);
    let model = dir.path().join("m.json");
    let base = [
        "eval-letor",
        "--train",
        data.to_str().unwrap(),
        "--test",
        data.to_str().unwrap(),
        "--objective",
        "soprc",
        "--graded",
        "--epochs",
        "5",
    ];
    let run = |extra: &[&str]| rankd(&[&base[..], extra].concat());
    let o = run(&[
        "--sample-rows",
        "4",
        "--out",
        model.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["objective"]["name"], "soprc");
    assert_eq!(v["sample_rows"], 4);
    let loaded = rankd::rerank::Reranker::load(&model).unwrap();
    assert_eq!(loaded.training.sample_rows, Some(4));
    assert_eq!(
        loaded.training.objective.kind(),
        rankd::rerank::ObjectiveKind::Soprc
    );

    for (extra, expected) in [
        (
            &["--soprc-beta", "0"][..],
            "--soprc-beta must be in (0, 1], got 0",
        ),
        (
            &["--soprc-quantiles", "0"][..],
            "--soprc-quantiles must be at least 1",
        ),
        (&["--sample-rows", "1"][..], "at least 2"),
    ] {
        let o = run(extra);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(expected), "{extra:?}: {}", stderr(&o));
    }
}
