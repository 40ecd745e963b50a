//! Whole-evaluation tests: conventions, errors, report shape. Expected values come from
//! pytrec_eval 0.5 (trec_eval 9) on the same data, run once and pasted here.

use super::*;

/// The data of the pytrec_eval session quoted in each test.
fn example() -> (Run, Qrels) {
    let mut qrels = Qrels::new();
    for (q, d, g) in [
        ("q1", "a", 1),
        ("q1", "b", 0),
        ("q1", "c", 2),
        ("q2", "x", 0),
        ("q2", "y", 0),
        ("q3", "z", 1),
        ("q5", "m", -1),
        ("q5", "n", 3),
    ] {
        qrels.insert(q, d, g);
    }
    let mut run = Run::new();
    for (q, d, s) in [
        ("q1", "a", 1.0),
        ("q1", "b", 2.0),
        ("q1", "d", 2.0),
        ("q1", "c", 0.5),
        ("q2", "x", 1.0),
        ("q4", "p", 1.0),
        ("q5", "m", 3.0),
        ("q5", "n", 1.0),
    ] {
        run.push(q, d, s);
    }
    (run, qrels)
}

fn linear(no_relevant: NoRelevant) -> EvalOptions {
    EvalOptions {
        cutoffs: vec![2, 10],
        gain: Gain::Linear,
        no_relevant,
        ..EvalOptions::default()
    }
}

fn close(a: Option<f64>, b: f64) {
    let a = a.expect("metric present");
    assert!((a - b).abs() < 1e-12, "{a} vs {b}");
}

#[test]
fn per_query_values_match_trec_eval() {
    // pytrec_eval, measures map P_2 recall_2 Rprec recip_rank ndcg ndcg_cut_10:
    // q1: map 0.41666666666666663, Rprec 0, recip_rank 1/3, P_2 0, recall_2 0,
    //     ndcg = ndcg_cut_10 = 0.5174418337467067
    // q2: all 0 (no relevant document)
    // q5: map 0.5, Rprec 0, recip_rank 0.5, P_2 0.5, recall_2 1, ndcg 0.6309297535714574
    // q3 (not in run) and q4 (not in qrels) are absent.
    let (run, qrels) = example();
    let report = evaluate(&run, &qrels, &linear(NoRelevant::Score)).unwrap();
    assert_eq!(
        report.per_query.keys().collect::<Vec<_>>(),
        ["q1", "q2", "q5"]
    );
    let q1 = &report.per_query["q1"];
    close(q1.get("ap"), 0.416_666_666_666_666_63);
    close(q1.get("r-prec"), 0.0);
    close(q1.get("rr"), 1.0 / 3.0);
    close(q1.get("p@2"), 0.0);
    close(q1.get("recall@2"), 0.0);
    close(q1.get("ndcg"), 0.517_441_833_746_706_7);
    close(q1.get("ndcg@10"), 0.517_441_833_746_706_7);
    let q2 = &report.per_query["q2"];
    assert!(q2.iter().all(|(_, v)| v == 0.0), "{q2:?}");
    let q5 = &report.per_query["q5"];
    close(q5.get("ap"), 0.5);
    close(q5.get("rr"), 0.5);
    close(q5.get("p@2"), 0.5);
    close(q5.get("recall@2"), 1.0);
    close(q5.get("ndcg"), 0.630_929_753_571_457_4);
    // Means over all three, as trec_eval does.
    assert_eq!(report.queries, 3);
    close(report.mean("map"), (0.416_666_666_666_666_63 + 0.5) / 3.0);
    close(report.mean("mrr"), (1.0 / 3.0 + 0.5) / 3.0);
}

#[test]
fn no_relevant_conventions() {
    let (run, qrels) = example();
    let skip = evaluate(&run, &qrels, &linear(NoRelevant::Skip)).unwrap();
    assert_eq!(skip.queries, 2);
    assert_eq!(skip.skipped_no_relevant, ["q2"]);
    close(skip.mean("map"), (0.416_666_666_666_666_63 + 0.5) / 2.0);
    let one = evaluate(&run, &qrels, &linear(NoRelevant::NdcgOne)).unwrap();
    assert_eq!(one.queries, 3);
    close(one.per_query["q2"].get("ndcg@10"), 1.0);
    close(one.per_query["q2"].get("ndcg"), 1.0);
    close(one.per_query["q2"].get("ap"), 0.0);
    close(
        one.mean("ndcg@10"),
        (0.517_441_833_746_706_7 + 1.0 + 0.630_929_753_571_457_4) / 3.0,
    );
}

#[test]
fn complete_scores_judged_queries_missing_from_the_run() {
    let (run, qrels) = example();
    let options = EvalOptions {
        complete: true,
        ..linear(NoRelevant::Skip)
    };
    let report = evaluate(&run, &qrels, &options).unwrap();
    assert_eq!(report.queries, 3);
    close(report.per_query["q3"].get("ap"), 0.0);
    close(report.mean("map"), (0.416_666_666_666_666_63 + 0.5) / 3.0);
    // An empty list in the run is a query that found nothing, scored even without `complete`.
    let mut run = run;
    run.insert("q3", vec![]);
    let report = evaluate(&run, &qrels, &linear(NoRelevant::Skip)).unwrap();
    assert_eq!(report.queries, 3);
}

#[test]
fn as_given_order_keeps_the_engine_ranking() {
    let (run, qrels) = example();
    let options = EvalOptions {
        order: RunOrder::AsGiven,
        ..linear(NoRelevant::Skip)
    };
    let report = evaluate(&run, &qrels, &options).unwrap();
    // q1 as given: a (rel), b, d, c (rel): AP = (1 + 2/4) / 2.
    close(report.per_query["q1"].get("ap"), 0.75);
}

#[test]
fn exponential_gain_changes_ndcg_only() {
    let (run, qrels) = example();
    let lin = evaluate(&run, &qrels, &linear(NoRelevant::Skip)).unwrap();
    let exp = evaluate(
        &run,
        &qrels,
        &EvalOptions {
            gain: Gain::Exponential,
            ..linear(NoRelevant::Skip)
        },
    )
    .unwrap();
    // q1 ranking d, b, a, c: gains 0, 0, 1, 3; ideal 3, 1.
    let expected = (1.0 / 2.0 + 3.0 / 5f64.log2()) / (3.0 + 1.0 / 3f64.log2());
    close(exp.per_query["q1"].get("ndcg@10"), expected);
    assert_eq!(lin.mean("map"), exp.mean("map"));
    assert_ne!(lin.mean("ndcg@10"), exp.mean("ndcg@10"));
}

#[test]
fn errors_are_clear() {
    let (run, qrels) = example();
    let bad = |options: EvalOptions| evaluate(&run, &qrels, &options).unwrap_err().to_string();
    assert_eq!(
        bad(EvalOptions {
            relevance_threshold: 0,
            ..EvalOptions::default()
        }),
        "invalid evaluation option: relevance threshold must be at least 1 (grade 0 is \
         non-relevant), got 0"
    );
    assert_eq!(
        bad(EvalOptions {
            cutoffs: vec![10, 0],
            ..EvalOptions::default()
        }),
        "invalid evaluation option: cutoff k must be at least 1"
    );
    assert!(bad(EvalOptions {
        cutoffs: vec![10, 10],
        ..EvalOptions::default()
    })
    .contains("cutoffs listed twice"));

    let mut dup = Run::new();
    dup.push("q1", "a", 1.0);
    dup.push("q1", "a", 2.0);
    assert_eq!(
        evaluate(&dup, &qrels, &EvalOptions::default()).unwrap_err(),
        EvalError::DuplicateDocument {
            qid: "q1".into(),
            doc: "a".into()
        }
    );
    let mut nan = Run::new();
    nan.push("q1", "a", f64::NAN);
    assert!(matches!(
        evaluate(&nan, &qrels, &EvalOptions::default()),
        Err(EvalError::NonFiniteScore { .. })
    ));
    let mut other = Run::new();
    other.push("Q1", "a", 1.0);
    assert_eq!(
        evaluate(&other, &qrels, &EvalOptions::default())
            .unwrap_err()
            .to_string(),
        "no query to evaluate: the run has 1 queries, the qrels 4, 0 in common, 0 of those with \
         a relevant document (do the query ids match?)"
    );
    let only_q2: Run = {
        let mut r = Run::new();
        r.push("q2", "x", 1.0);
        r
    };
    assert!(matches!(
        evaluate(&only_q2, &qrels, &EvalOptions::default()),
        Err(EvalError::NoQueries {
            common: 1,
            with_relevant: 0,
            ..
        })
    ));
}

#[test]
fn json_has_interface_keys_and_round_trips() {
    let (run, qrels) = example();
    let mut report = evaluate(&run, &qrels, &EvalOptions::default()).unwrap();
    report.model = Some("bm25".into());
    let json = serde_json::to_string(&report).unwrap();
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    for key in [
        "model",
        "queries",
        "map",
        "mrr",
        "ndcg@10",
        "p@10",
        "recall@100",
        "err@10",
    ] {
        assert!(value.get(key).is_some(), "missing {key} in {json}");
    }
    assert_eq!(value["queries"], 2);
    assert_eq!(value["conventions"]["gain"], "exponential");
    assert_eq!(value["conventions"]["no_relevant"], "skip");
    assert!(value["per_query"]["q1"]["ap"].is_number());
    // Means come first, in report order.
    assert!(json.find("\"map\"").unwrap() < json.find("\"p@1\"").unwrap());
    // serde_json (without its `float_roundtrip` feature) may parse the last bit differently.
    let back: Report = serde_json::from_str(&json).unwrap();
    assert_eq!(back.conventions, report.conventions);
    assert_eq!(back.per_query.len(), report.per_query.len());
    for (a, b) in back.per_query.values().zip(report.per_query.values()) {
        assert_eq!(a.len(), b.len());
        for ((na, va), (nb, vb)) in a.iter().zip(b.iter()) {
            assert_eq!(na, nb);
            assert!((va - vb).abs() < 1e-15);
        }
    }
    let mut table = Vec::new();
    report.write_table(&mut table, true).unwrap();
    let table = String::from_utf8(table).unwrap();
    assert!(table.contains("ap          \tq1\t0.4167"), "{table}");
    assert!(table.contains("map         \t0.4583"), "{table}");
}
