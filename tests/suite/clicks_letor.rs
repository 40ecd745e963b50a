//! Learning from clicks on the LETOR example as a user runs it (GUIDE, "Learning from
//! clicks"): `rankd simulate-clicks`, then `rankd eval-letor --train-clicks` with and without
//! inverse-propensity weights, scored on the test file's expert labels.

use serde_json::Value;

use crate::util::{numbers, rankd, rankd_ok, shared_data, stderr};

/// `--train-clicks` with the default click labels (graded) and no noise floor.
fn eval(train: &str, test: &str, sessions: &str, debias: &str) -> Value {
    eval_with(train, test, sessions, debias, "graded", "none")
}

fn eval_with(
    train: &str,
    test: &str,
    sessions: &str,
    debias: &str,
    click_labels: &str,
    noise_floor: &str,
) -> Value {
    let o = rankd_ok([
        "eval-letor",
        "--train",
        train,
        "--test",
        test,
        "--train-clicks",
        sessions,
        "--debias",
        debias,
        "--click-labels",
        click_labels,
        "--noise-floor",
        noise_floor,
        "--trees",
        "40",
        "--json",
    ]);
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The semi-synthetic protocol's point: clicks at rank 1 are cheap, so a model trained on raw
/// clicks learns the logging ranker's bias; dividing each click by its rank's estimated
/// examination probability undoes it. The estimate comes from the sessions alone.
#[test]
fn ips_beats_naive_click_training_and_recovers_the_position_bias() {
    let dir = tempfile::tempdir().unwrap();
    let train = shared_data("letor-lightgbm/rank.train");
    let test = shared_data("letor-lightgbm/rank.test");
    let (train, test) = (train.to_str().unwrap(), test.to_str().unwrap());
    let sessions = dir.path().join("sessions.jsonl");
    let sessions = sessions.to_str().unwrap();
    let o = rankd_ok([
        "simulate-clicks",
        "--letor",
        train,
        "--out",
        sessions,
        "--sessions",
        "40000",
        "--json",
    ]);
    let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(summary["protocol"]["sessions"], 40000);
    let lines = std::fs::read_to_string(sessions).unwrap();
    assert_eq!(lines.lines().count(), 40000);

    let ips = eval(train, test, sessions, "ips");
    let naive = eval(train, test, sessions, "none");
    // Examination (1/k)^η with η = 1, relative to rank 1.
    let estimate = numbers(&ips["propensities"]);
    assert_eq!(estimate.len(), 10);
    for (k, p) in estimate.iter().enumerate().take(5) {
        let truth = 1.0 / (k + 1) as f64;
        assert!((p - truth).abs() < 0.12, "rank {}: {p} vs {truth}", k + 1);
    }
    assert_eq!(naive["propensities"].as_array().unwrap().len(), 0);
    let (a, b) = (
        ips["test"]["ndcg@10"].as_f64().unwrap(),
        naive["test"]["ndcg@10"].as_f64().unwrap(),
    );
    assert!(a > b + 0.03, "IPS NDCG@10 {a} vs naive {b}");
    // Graded labels: one group per query with a click (the training file has 201 queries).
    assert_eq!(ips["click_labels"], "graded", "{ips}");
    let groups = ips["train_groups"].as_u64().unwrap();
    assert!((100..=201).contains(&groups), "{groups} groups");

    // The affine correction (binary groups, one per clicked document) estimates the protocol's
    // click noise (ε⁻ = 0.1) from the same sessions and leaves out the clicked documents it
    // explains entirely.
    assert!(ips["noise_floor"].is_null(), "{ips}");
    let affine = eval_with(train, test, sessions, "ips", "binary", "estimate");
    assert_eq!(affine["click_labels"], "binary", "{affine}");
    let floor = affine["noise_floor"].as_f64().unwrap();
    assert!((floor - 0.1).abs() < 0.02, "noise floor {floor}");
    let (left_out, groups) = (
        affine["below_floor"].as_u64().unwrap(),
        affine["train_groups"].as_u64().unwrap(),
    );
    assert!(left_out > 0 && groups > 0, "{left_out} {groups}");
}

#[test]
fn sessions_that_do_not_match_the_training_file_are_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let train = shared_data("letor-lightgbm/rank.train");
    let train = train.to_str().unwrap();
    let sessions = dir.path().join("s.jsonl");
    for (content, want) in [
        (
            r#"{"qid":"1","shown":[0,99],"clicks":[]}"#,
            "row 99 is beyond query `1`",
        ),
        (
            r#"{"qid":"nope","shown":[0],"clicks":[0]}"#,
            "query `nope` is not in",
        ),
        (
            r#"{"qid":"1","shown":[0],"clicks":[1]}"#,
            "row 1 is clicked but not shown",
        ),
        (r#"{"qid":"1","shown":[0]}"#, "s.jsonl:1: not a session"),
    ] {
        std::fs::write(&sessions, format!("{content}\n")).unwrap();
        let o = rankd(&[
            "eval-letor",
            "--train",
            train,
            "--test",
            train,
            "--train-clicks",
            sessions.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{content}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{content}: {}", stderr(&o));
    }
}

/// `rankd click-model` on simulated PBM sessions: the four models fitted, judged on held-out
/// sessions; the DBN's perseverance and the PBM's position bias are where the simulation puts
/// them; the prior keeps the held-out log-likelihood from collapsing; every parameter file is
/// written. (Parity of the likelihoods with clax: bench/click_models_crosscheck.py, in CI.)
#[test]
fn click_models_are_fitted_and_compared_on_held_out_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let train = shared_data("letor-lightgbm/rank.train");
    let sessions = dir.path().join("sessions.jsonl");
    let sessions = sessions.to_str().unwrap();
    rankd_ok([
        "simulate-clicks",
        "--letor",
        train.to_str().unwrap(),
        "--out",
        sessions,
        "--sessions",
        "20000",
        "--json",
    ]);
    let params = dir.path().join("params");
    let fit = |prior: &str| -> Value {
        let o = rankd_ok([
            "click-model",
            "--sessions",
            sessions,
            "--prior",
            prior,
            "--parameters",
            params.to_str().unwrap(),
            "--json",
        ]);
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let report = fit("1,4");
    assert_eq!(report["train_sessions"], 16000);
    assert_eq!(report["test_sessions"], 4000);
    let models = report["models"].as_array().unwrap();
    let names: Vec<&str> = models
        .iter()
        .map(|m| m["model"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["pbm", "ubm", "cascade", "dbn"]);
    let ll = |m: &Value| m["test"]["log_likelihood"].as_f64().unwrap();
    // PBM generated the clicks: it explains the held-out ones better than the cascade,
    // which cannot explain a second click.
    assert!(ll(&models[0]) > ll(&models[2]) + 0.05, "{models:?}");
    let exam = numbers(&models[0]["examination_relative"]);
    assert!((exam[1] - 0.5).abs() < 0.15 && exam[9] < 0.3, "{exam:?}");
    let gamma = models[3]["continuation"].as_f64().unwrap();
    assert!(gamma > 0.5 && gamma < 1.0, "DBN perseverance {gamma}");
    for m in ["pbm", "ubm", "cascade", "dbn"] {
        let p: Value =
            serde_json::from_slice(&std::fs::read(params.join(format!("{m}.json"))).unwrap())
                .unwrap();
        assert_eq!(p["model"], m);
        assert!(p["pairs"].as_array().unwrap().len() > 1000, "{m}");
    }
    // Maximum likelihood overfits the pairs seen a few times: held-out clicks on them look
    // impossible.
    let mle = fit("0,0");
    let mle_pbm = &mle["models"][0];
    assert!(
        ll(&models[0]) > ll(mle_pbm) + 0.01,
        "{} vs {}",
        ll(&models[0]),
        ll(mle_pbm)
    );

    for (args, want) in [
        (vec!["--prior", "1"], "expected CLICKS,SKIPS"),
        (vec!["--prior=-1,4"], "pseudo-counts"),
        (vec!["--holdout", "1.5"], "--holdout must be in (0, 1)"),
        (vec!["--model", "xyz"], "invalid value"),
    ] {
        let mut all = vec!["click-model", "--sessions", sessions];
        all.extend(args);
        let o = rankd(&all);
        assert_eq!(o.status.code(), Some(2), "{all:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{all:?}: {}", stderr(&o));
    }
}
