//! Issue 32, deliverable 5, against a real `rankd serve` (SQLite, or PostgreSQL with
//! `RANKD_TEST_DATABASE_URL`): `POST /admin/experiments` validates and stores an experiment,
//! `/search` interleaves its share of the reranked first pages and logs each hit's team, the
//! clicks `POST /events` stores credit the right team in `GET /admin/experiments/{id}`,
//! stopping ends the interleaving, and `promote_on_win` activates a winning candidate.
//! The simulated-users measurement (PBM over judged queries) is `interleave_users`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::util::*;

/// Two uploaded tree models, the first active: (xgboost id, lightgbm id).
fn two_models(b: &str) -> (String, String) {
    let upload = |query: &str, bytes: &[u8]| {
        let a = call(
            "POST",
            &format!("{b}/admin/models{query}"),
            Some(TOKEN),
            Some(("application/octet-stream", bytes)),
        );
        assert_eq!(a.status, 201, "{}", a.body);
        a.body["model"].as_str().unwrap().to_string()
    };
    let xgb = String::from_utf8(std::fs::read(gbdt_fixtures().join("xgb_rank_ndcg.json")).unwrap())
        .unwrap()
        .replace("\"bm25\"", "\"bm25f\"")
        .replace("\"pagerank\"", "\"link.pagerank\"")
        .replace("\"url_depth\"", "\"url.depth\"")
        .replace("\"title_match\"", "\"title.bm25\"");
    let a = upload("", xgb.as_bytes());
    let lgb = std::fs::read(gbdt_fixtures().join("lgb_none_unnamed.txt")).unwrap();
    let c = upload("?format=lightgbm", &lgb);
    let act = post_json(&format!("{b}/admin/models/{a}/activate"), Some(TOKEN), "");
    assert_eq!(act.status, 200, "{}", act.body);
    (a, c)
}

/// A shown document as stored: object id, position, team.
type Shown = (String, i64, Option<String>);

/// The stored impression of `query_id` (waiting for the queue): its experiment id and its
/// shown documents.
fn impression(db: &str, query_id: &str) -> (Option<i64>, Vec<Shown>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let rows = column(
            db,
            &format!(
                "SELECT COALESCE(CAST(experiment_id AS TEXT), 'NULL') || '|' || shown \
                 FROM search_impressions WHERE query_id = '{query_id}'"
            ),
        );
        if let Some(row) = rows.into_iter().next() {
            let (experiment, shown) = row.split_once('|').unwrap();
            let shown: Vec<Value> = serde_json::from_str(shown).unwrap();
            let shown = shown
                .iter()
                .map(|s| {
                    (
                        s["object_id"].as_str().unwrap().to_string(),
                        s["position"].as_i64().unwrap(),
                        s["team"].as_str().map(str::to_string),
                    )
                })
                .collect();
            return (experiment.parse().ok(), shown);
        }
        assert!(Instant::now() < deadline, "no impression {query_id}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn search_id(b: &str, params: &str) -> String {
    let a = get(&format!("{b}/search?{params}"), None);
    assert_eq!(a.status, 200, "{}", a.body);
    a.body["query_id"].as_str().unwrap().to_string()
}

fn click(b: &str, query_id: &str, object_id: &str, position: i64) {
    let event = json!({"action_name": "click", "query_id": query_id, "object_id": object_id,
                       "position": position});
    let a = call(
        "POST",
        &format!("{b}/events"),
        None,
        Some(("application/json", format!("[{event}]").as_bytes())),
    );
    assert!(a.status < 300, "{}", a.body);
}

/// Clicks the first shown document of `team` in an interleaved impression.
fn click_team(b: &str, query_id: &str, shown: &[Shown], team: &str) {
    let (id, position, _) = shown
        .iter()
        .find(|s| s.2.as_deref() == Some(team))
        .unwrap_or_else(|| panic!("no {team} document in {shown:?}"));
    click(b, query_id, id, *position);
}

const QUERIES: &[&str] = &[
    "vector+basics",
    "iterator+notes",
    "thread+basics",
    "socket+guide",
    "parser+basics",
    "matrix+notes",
];

#[test]
fn experiments_interleave_credit_clicks_stop_and_promote() {
    let dir = tempfile::tempdir().unwrap();
    let (_data, db, server) = topic_server(dir.path(), false);
    let b = &server.base;
    let t = Some(TOKEN);
    let experiments = format!("{b}/admin/experiments");

    // Nothing runs: no interleaving.
    assert_eq!(
        get(&experiments, t).body,
        json!({"running": null, "experiments": []})
    );
    // No active reranker: nothing to compare with.
    assert_error(
        &post_json(&experiments, t, r#"{"candidate":"x","share":1}"#),
        409,
        None,
        "no reranker is active",
    );
    let (active, candidate) = two_models(b);

    // Validation: 4xx naming the field, nothing stored.
    let before = snapshot(&db);
    let c = &candidate;
    for (body, status, field, says) in [
        (
            json!({"candidate": "nope", "share": 1}),
            400,
            "candidate",
            "no model",
        ),
        (
            json!({"candidate": active, "share": 1}),
            400,
            "candidate",
            "active reranker",
        ),
        (
            json!({"candidate": " ", "share": 1}),
            400,
            "candidate",
            "empty",
        ),
        (json!({"candidate": c, "share": 0}), 400, "share", "(0, 1]"),
        (
            json!({"candidate": c, "share": 1.5}),
            400,
            "share",
            "(0, 1]",
        ),
        (
            json!({"candidate": c, "share": 1, "alpha": 1}),
            400,
            "alpha",
            "(0, 1)",
        ),
        (
            json!({"candidate": c, "share": 1, "alpha": -0.1}),
            400,
            "alpha",
            "(0, 1)",
        ),
        (
            json!({"candidate": c, "share": "all"}),
            400,
            "share",
            "invalid type",
        ),
        (
            json!({"candidate": c, "share": 1, "min_impressions": -1}),
            400,
            "min_impressions",
            "invalid value",
        ),
        (
            json!({"candidate": c, "share": 1, "promote_on_win": "yes"}),
            400,
            "promote_on_win",
            "invalid type",
        ),
        (
            json!({"candidate": c, "share": 1, "colour": "red"}),
            400,
            "colour",
            "unknown field",
        ),
        (
            json!({"share": 1}),
            400,
            "body",
            "missing field `candidate`",
        ),
    ] {
        let a = post_json(&experiments, t, &body.to_string());
        assert_error(&a, status, Some(field), says);
    }
    assert_error(&post_json(&experiments, None, "{}"), 401, None, "");
    assert_eq!(snapshot(&db), before);
    assert_error(
        &get(&format!("{experiments}/7"), t),
        404,
        None,
        "no experiment",
    );

    // Half the traffic interleaved.
    let a = post_json(
        &experiments,
        t,
        &json!({"candidate": c, "share": 0.5, "min_impressions": 5}).to_string(),
    );
    assert_eq!(a.status, 201, "{}", a.body);
    let id = a.body["id"].as_i64().unwrap();
    assert_eq!(a.body["status"], "running");
    assert_eq!(a.body["active"], active.as_str());
    assert_eq!(a.body["alpha"], 0.05);
    assert_eq!(a.body["promote_on_win"], false);
    assert_eq!(a.body["decision"], "collecting");
    assert_error(
        &post_json(
            &experiments,
            t,
            &json!({"candidate": c, "share": 1}).to_string(),
        ),
        409,
        None,
        "is running",
    );

    let mut interleaved = Vec::new();
    for i in 0..40 {
        let q = QUERIES[i % QUERIES.len()];
        let qid = search_id(b, &format!("q={q}&k=6"));
        let (experiment, shown) = impression(&db, &qid);
        match experiment {
            Some(e) => {
                assert_eq!(e, id);
                // Both teams, balanced to within one at every prefix.
                let mut diff = 0i64;
                for s in &shown {
                    diff += if s.2.as_deref() == Some("A") { 1 } else { -1 };
                    assert!(diff.abs() <= 1, "{shown:?}");
                }
                assert!(shown.iter().all(|s| s.2.is_some()), "{shown:?}");
                interleaved.push((qid, shown));
            }
            None => assert!(shown.iter().all(|s| s.2.is_none()), "{shown:?}"),
        }
    }
    // P(fewer than 8 or more than 32 of 40 at share 0.5) < 1e-4.
    assert!(
        (8..=32).contains(&interleaved.len()),
        "{}",
        interleaved.len()
    );
    // Not interleaved: later pages, first-phase answers.
    for params in [
        "q=vector+basics&k=3&offset=3",
        "q=vector+basics&rerank=false",
    ] {
        for _ in 0..6 {
            let qid = search_id(b, params);
            assert_eq!(impression(&db, &qid).0, None, "{params}");
        }
    }

    // Clicks: three impressions for A, one tie, the rest for B; one unclicked.
    let n = interleaved.len() as u64;
    for (k, (qid, shown)) in interleaved.iter().enumerate() {
        match k {
            0..=2 => click_team(b, qid, shown, "A"),
            3 => {
                click_team(b, qid, shown, "A");
                click_team(b, qid, shown, "B");
            }
            4 => {}
            _ => click_team(b, qid, shown, "B"),
        }
    }
    let e = get(&format!("{experiments}/{id}"), t).body;
    assert_eq!(e["impressions"], n, "{e}");
    assert_eq!(e["clicked_impressions"], n - 1, "{e}");
    assert_eq!(e["wins_a"], 3, "{e}");
    assert_eq!(e["ties"], 1, "{e}");
    assert_eq!(e["wins_b"], n - 5, "{e}");
    let p = e["p_value"].as_f64().unwrap();
    let expected = rankd::interleave::sign_test(3, n - 5);
    assert!((p - expected).abs() < 1e-12, "{e}: expected p {expected}");
    let verdict = if expected < 0.05 {
        "candidate_wins"
    } else {
        "no_difference_yet"
    };
    assert_eq!(e["decision"], verdict, "{e}");
    let sequential = rankd::interleave::always_valid_p(3, n - 5);
    assert!(
        (e["sequential_p_value"].as_f64().unwrap() - sequential).abs() < 1e-12,
        "{e}"
    );
    // The metrics: every interleaved search counted as it is answered; the counts and
    // p-values as the GET computed them.
    let label = format!("experiment=\"{id}\"");
    assert_eq!(
        metric(b, "rankd_interleaved_impressions_total", &[&label]),
        Some(n as f64)
    );
    for (outcome, want) in [("a", 3), ("b", n - 5), ("tie", 1), ("no_click", 1)] {
        let o = format!("outcome=\"{outcome}\"");
        assert_eq!(
            metric(b, "rankd_experiment_impressions", &[&label, &o]),
            Some(want as f64),
            "{outcome}"
        );
    }
    for (test, want) in [("sign", expected), ("sequential", sequential)] {
        let got = metric(
            b,
            "rankd_experiment_p_value",
            &[&label, &format!("test=\"{test}\"")],
        );
        assert!(
            (got.unwrap() - want).abs() < 1e-9,
            "{test}: {got:?} vs {want}"
        );
    }
    // Not promoted without promote_on_win.
    assert_eq!(e["status"], "running");
    let list = get(&experiments, t).body;
    assert_eq!(list["running"], id);
    assert_eq!(list["experiments"][0]["wins_b"], n - 5);

    // The running experiment's candidate cannot be deleted.
    assert_error(
        &call("DELETE", &format!("{b}/admin/models/{candidate}"), t, None),
        409,
        None,
        "candidate of the running experiment",
    );

    // Stopped: no interleaving; the counts stay.
    let a = post_json(&format!("{experiments}/{id}/stop"), t, "");
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["status"], "stopped");
    assert_eq!(a.body["wins_b"], n - 5);
    assert!(a.body["stopped_at"].is_string());
    assert_error(
        &post_json(&format!("{experiments}/{id}/stop"), t, ""),
        409,
        None,
        "not running",
    );
    for _ in 0..10 {
        let qid = search_id(b, "q=vector+basics");
        assert_eq!(impression(&db, &qid).0, None);
    }

    // Promote on win: the candidate is activated once it wins after min_impressions.
    let a = post_json(
        &experiments,
        t,
        &json!({"candidate": c, "share": 1, "min_impressions": 10, "promote_on_win": true})
            .to_string(),
    );
    assert_eq!(a.status, 201, "{}", a.body);
    let id2 = a.body["id"].as_i64().unwrap();
    assert_ne!(id2, id);
    let mut wins = BTreeMap::new();
    for i in 0..10 {
        let qid = search_id(b, &format!("q={}", QUERIES[i % QUERIES.len()]));
        let (experiment, shown) = impression(&db, &qid);
        assert_eq!(experiment, Some(id2));
        click_team(b, &qid, &shown, "B");
        wins.insert(qid, shown);
        if i == 6 {
            // Seven wins of seven (always-valid p = 8/128), under min_impressions: running.
            let e = get(&format!("{experiments}/{id2}"), t).body;
            assert_eq!(e["status"], "running", "{e}");
            assert_eq!(e["decision"], "collecting", "{e}");
        }
    }
    let e = get(&format!("{experiments}/{id2}"), t).body;
    assert_eq!(e["wins_b"], 10, "{e}");
    // Always-valid p = 11/1024 < 0.05.
    assert_eq!(e["sequential_decision"], "candidate_wins", "{e}");
    assert_eq!(e["status"], "promoted", "{e}");
    assert!(e["note"].as_str().unwrap().contains("promoted"), "{e}");
    let models = get(&format!("{b}/admin/models"), t).body;
    assert_eq!(models["active"], c.as_str(), "{models}");
    assert_eq!(
        get(&format!("{b}/search?q=vector+basics"), None).body["reranker"],
        c.as_str()
    );
    assert_eq!(get(&experiments, t).body["running"], Value::Null);

    // The admin page lists experiments with their counts.
    let text = |path: &str| {
        get(&format!("{b}{path}"), None)
            .body
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(text("/admin").contains("experiments-section"));
    let script = text("/static/admin.js");
    assert!(script.contains("/admin/experiments") && script.contains("wins_b"));
}

/// A running experiment survives a restart: the candidate is loaded again and searches are
/// interleaved under the same experiment; one whose candidate file is gone is ended.
#[test]
fn a_running_experiment_resumes_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (data, db, server) = topic_server(dir.path(), false);
    let t = Some(TOKEN);
    let (_, candidate) = two_models(&server.base);
    let a = post_json(
        &format!("{}/admin/experiments", server.base),
        t,
        &json!({"candidate": candidate, "share": 1}).to_string(),
    );
    assert_eq!(a.status, 201, "{}", a.body);
    let id = a.body["id"].as_i64().unwrap();
    server.stop();

    let server = start(&data, &db, Some(TOKEN));
    let b = &server.base;
    let qid = search_id(b, "q=vector+basics");
    assert_eq!(impression(&db, &qid).0, Some(id));
    let e = get(&format!("{b}/admin/experiments/{id}"), t).body;
    assert_eq!(e["status"], "running", "{e}");
    assert_eq!(e["impressions"], 1, "{e}");
    server.stop();

    // The candidate's file is gone: the experiment ends at start-up, searches are plain.
    let file = column(
        &db,
        &format!("SELECT file_path FROM models WHERE id = '{candidate}'"),
    );
    std::fs::remove_file(&file[0]).unwrap();
    let server = start(&data, &db, Some(TOKEN));
    let b = &server.base;
    let e = get(&format!("{b}/admin/experiments/{id}"), t).body;
    assert_eq!(e["status"], "stopped", "{e}");
    assert!(
        e["note"].as_str().unwrap().contains("cannot be served"),
        "{e}"
    );
    let qid = search_id(b, "q=vector+basics");
    assert_eq!(impression(&db, &qid).0, None);
}
