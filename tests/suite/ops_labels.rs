//! The next batch to label (SPEC §5) over HTTP against a real server, on SQLite or PostgreSQL
//! (`RANKD_TEST_DATABASE_URL`): bad requests change nothing; reserved pairs stay out of later
//! batches until they are judged, released or expired; an empty pool has a defined answer;
//! with an active reranker the pool is scored by it.

use std::collections::BTreeSet;

use crate::util::*;
use serde_json::Value;

/// As `util::assert_error`, and no field named when `field` is `None`.
fn assert_error_exact(a: &Answer, status: u16, field: Option<&str>, says: &str) {
    assert_eq!(a.status, status, "{}", a.body);
    assert_eq!(a.body["error"]["field"].as_str(), field, "{}", a.body);
    let message = a.body["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains(says), "expected {says:?} in {}", a.body);
}

fn pairs(batch: &Value) -> BTreeSet<(String, String)> {
    batch["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["query_id"].as_str().unwrap().to_string(),
                i["doc_id"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn setup() -> (tempfile::TempDir, String, Server) {
    let dir = tempfile::tempdir().unwrap();
    let (_, db, server) = topic_server(dir.path(), true);
    (dir, db, server)
}

#[test]
fn batches_reserve_pairs_until_judged_released_or_expired() {
    let (_dir, db, server) = setup();
    let b = &server.base;
    let t = Some(TOKEN);
    let batch = |body: &str| post_json(&format!("{b}/admin/label-batch"), t, body);

    // Nothing to draw from before any query text is stored.
    let before = snapshot(&db);
    assert_error_exact(
        &batch(r#"{"assessor":"ann"}"#),
        409,
        None,
        "no stored query texts",
    );
    assert_eq!(snapshot(&db), before);

    let a = post_text(
        &format!("{b}/admin/queries"),
        t,
        "q1 vector basics\nq2 thread basics\nq3 parser notes\n",
    );
    assert_eq!(a.status, 200, "{}", a.body);

    // Bad requests: a 400 naming the field, nothing reserved.
    let before = snapshot(&db);
    for (body, field, says) in [
        (r#"{"assessor":"ann","k":0}"#, "k", "between 1 and 1000"),
        (
            r#"{"assessor":"ann","k":1000000000}"#,
            "k",
            "between 1 and 1000",
        ),
        (r#"{"assessor":"ann","k":-1}"#, "k", "invalid"),
        (r#"{"assessor":"ann","k":2.5}"#, "k", "invalid"),
        (r#"{"assessor":"ann","lambda":1.5}"#, "lambda", "[0, 1]"),
        (r#"{"assessor":"ann","lambda":-0.1}"#, "lambda", "[0, 1]"),
        (r#"{"assessor":"ann","lambda":"half"}"#, "lambda", "invalid"),
        (
            r#"{"assessor":"ann","window":0}"#,
            "window",
            "between 1 and",
        ),
        (
            r#"{"assessor":"ann","window":5000}"#,
            "window",
            "between 1 and",
        ),
        (
            r#"{"assessor":"ann","ttl_secs":0}"#,
            "ttl_secs",
            "between 1 and",
        ),
        (
            r#"{"assessor":"ann","first_phase":"pagerank"}"#,
            "first_phase",
            "unknown model",
        ),
        (r#"{"assessor":"ann","query_ids":[]}"#, "query_ids", "empty"),
        (
            r#"{"assessor":"ann","query_ids":["q1","q9"]}"#,
            "query_ids[1]",
            "no stored text",
        ),
        (r#"{"assessor":"ann","size":5}"#, "size", "unknown field"),
        (
            r#"{"assessor":"ann","strategy":"greedy"}"#,
            "strategy",
            "strategy must be \"angle\" or \"loss\", got \"greedy\"",
        ),
        (
            r#"{"assessor":"ann","alpha":2}"#,
            "alpha",
            "alpha applies to strategy \"loss\"",
        ),
        (
            r#"{"assessor":"ann","strategy":"loss","lambda":0.5}"#,
            "lambda",
            "lambda applies to strategy \"angle\"",
        ),
        (
            r#"{"assessor":"ann","strategy":"loss","balance":0.7}"#,
            "balance",
            "balance must be in [0, 0.5], got 0.7",
        ),
        (
            r#"{"assessor":"ann","strategy":"loss","beta":-1}"#,
            "beta",
            "beta must be in [0, ∞), got -1",
        ),
        (r#"{"k":5}"#, "body", "missing field `assessor`"),
        (r#"{"assessor":"  "}"#, "assessor", "empty"),
        (r#""ann""#, "body", "invalid type"),
        ("not json", "body", "invalid JSON"),
    ] {
        assert_error_exact(&batch(body), 400, Some(field), says);
    }
    assert_eq!(snapshot(&db), before);

    // A first batch: k pairs, ordered by the criterion, reserved for ann.
    let first = batch(r#"{"assessor":"ann","k":6,"lambda":0.5,"ttl_secs":600}"#);
    assert_eq!(first.status, 200, "{}", first.body);
    let f = &first.body;
    assert_eq!(f["items"].as_array().unwrap().len(), 6, "{f}");
    assert_eq!(f["scored_by"], "first_phase");
    assert!(f["model"].is_null());
    assert_eq!(f["queries"], 3);
    let pool = f["pool_size"].as_u64().unwrap();
    assert!(pool >= 40, "{f}");
    assert_eq!(
        f["items"][0]["max_cos"], 0.0,
        "the first pick is by margin alone"
    );
    for (i, item) in f["items"].as_array().unwrap().iter().enumerate() {
        assert_eq!(item["pos"], i + 1);
        let (g, c, o) = (
            item["margin"].as_f64().unwrap(),
            item["max_cos"].as_f64().unwrap(),
            item["objective"].as_f64().unwrap(),
        );
        assert!(
            (0.0..=1.0).contains(&g) && (0.0..=1.0).contains(&c),
            "{item}"
        );
        assert!((o - (0.5 * g + 0.5 * c)).abs() < 1e-9, "{item}");
    }
    let batch1 = f["batch_id"].as_str().unwrap().to_string();
    let first_pairs = pairs(f);
    assert_eq!(first_pairs.len(), 6, "no pair twice in a batch");
    let listed = get(&format!("{b}/admin/reservations?assessor=ann"), t);
    assert_eq!(listed.body["total"], 6, "{}", listed.body);
    assert_eq!(listed.body["reservations"][0]["batch_id"], batch1.as_str());
    assert_eq!(
        column(&db, "SELECT COUNT(*) FROM label_reservations"),
        vec!["6"]
    );

    // A second batch (plain margin) never offers a reserved pair; its margins ascend.
    let second = batch(r#"{"assessor":"bob","k":6,"lambda":1}"#);
    assert_eq!(second.status, 200, "{}", second.body);
    let s = &second.body;
    assert_eq!(s["pool_size"].as_u64().unwrap(), pool - 6);
    let second_pairs = pairs(s);
    assert!(first_pairs.is_disjoint(&second_pairs), "{f} {s}");
    let margins: Vec<f64> = s["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["margin"].as_f64().unwrap())
        .collect();
    assert!(margins.windows(2).all(|w| w[0] <= w[1]), "{margins:?}");
    for i in s["items"].as_array().unwrap() {
        assert_eq!(i["objective"], i["margin"]);
    }
    let batch2 = s["batch_id"].as_str().unwrap().to_string();

    // Judging a reserved pair releases its reservation; it stays out of the pool (judged).
    let (q, d) = first_pairs.iter().next().unwrap().clone();
    let a = post_json(
        &format!("{b}/admin/judgments"),
        t,
        &serde_json::json!({"query_id": q, "doc_id": d, "grade": 1, "source": "ann"}).to_string(),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let listed = get(&format!("{b}/admin/reservations?batch_id={batch1}"), t);
    assert_eq!(listed.body["total"], 5, "{}", listed.body);
    assert_eq!(get(&format!("{b}/admin/reservations"), t).body["total"], 11);

    // Releasing a batch makes its pairs available again.
    let before = snapshot(&db);
    assert_error_exact(
        &call("DELETE", &format!("{b}/admin/label-batch/lb-nope"), t, None),
        404,
        None,
        "no label batch",
    );
    assert_error_exact(
        &get(&format!("{b}/admin/reservations?limit=0"), t),
        400,
        Some("limit"),
        "between 1 and 1000",
    );
    assert_eq!(snapshot(&db), before);
    let a = call(
        "DELETE",
        &format!("{b}/admin/label-batch/{batch2}"),
        t,
        None,
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["released"], 6);
    let a = call(
        "DELETE",
        &format!("{b}/admin/label-batch/{batch2}"),
        t,
        None,
    );
    assert_eq!(a.body["released"], 0, "releasing twice is harmless");

    // Everything that is left: the pool minus ann's 5 reserved and the judged pair.
    let rest = batch(r#"{"assessor":"cy","k":1000,"ttl_secs":3600}"#);
    assert_eq!(rest.status, 200, "{}", rest.body);
    assert_eq!(rest.body["pool_size"].as_u64().unwrap(), pool - 6);
    assert_eq!(
        rest.body["items"].as_array().unwrap().len() as u64,
        pool - 6,
        "k above the pool gives all of it"
    );
    let rest_pairs = pairs(&rest.body);
    assert!(rest_pairs.is_disjoint(&first_pairs));
    assert!(
        second_pairs.is_subset(&rest_pairs),
        "released pairs are offered again"
    );

    // An empty pool: a defined answer that reserves nothing.
    let before = snapshot(&db);
    let empty = batch(r#"{"assessor":"dee","k":3}"#);
    assert_eq!(empty.status, 200, "{}", empty.body);
    assert_eq!(empty.body["pool_size"], 0);
    assert!(empty.body["batch_id"].is_null());
    assert_eq!(empty.body["items"], serde_json::json!([]));
    assert_eq!(snapshot(&db), before);

    // Expiry: ann's reservations lapse, and the next batch offers exactly them.
    sql(
        &db,
        &format!("UPDATE label_reservations SET expires_at = 1 WHERE batch_id = '{batch1}'"),
    );
    assert_eq!(
        get(&format!("{b}/admin/reservations?assessor=ann"), t).body["total"],
        0
    );
    let again = batch(r#"{"assessor":"eve","k":50}"#);
    assert_eq!(again.status, 200, "{}", again.body);
    let mut expected = first_pairs.clone();
    expected.remove(&(q.clone(), d.clone()));
    assert_eq!(pairs(&again.body), expected);
    // The expired rows were replaced by eve's.
    assert_eq!(
        column(
            &db,
            &format!("SELECT COUNT(*) FROM label_reservations WHERE batch_id = '{batch1}'")
        ),
        vec!["0"]
    );

    // Only stored queries named in `query_ids` form the pool.
    sql(&db, "DELETE FROM label_reservations");
    let one = batch(r#"{"assessor":"fay","k":1000,"query_ids":["q2"]}"#);
    assert_eq!(one.status, 200, "{}", one.body);
    assert_eq!(one.body["queries"], 1);
    assert!(pairs(&one.body).iter().all(|(q, _)| q == "q2"));

    // A stored text with nothing to search for (stop words only) is listed as skipped.
    assert_eq!(
        post_text(&format!("{b}/admin/queries"), t, "q4 the of and\n").status,
        200
    );
    sql(&db, "DELETE FROM label_reservations");
    let a = batch(r#"{"assessor":"gus","k":2,"query_ids":["q4","q1"]}"#);
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["skipped_queries"], serde_json::json!(["q4"]));
    assert_eq!(a.body["queries"], 1);
}

#[test]
fn an_active_reranker_scores_the_pool() {
    let (_dir, _db, server) = setup();
    let b = &server.base;
    let t = Some(TOKEN);
    let mut rows = Vec::new();
    for (q, topic) in ["vector", "thread", "parser"].iter().enumerate() {
        for i in 0..24 {
            rows.push(serde_json::json!({
                "query_id": format!("t{q}"), "query": format!("{topic} basics"),
                "doc_id": format!("d{i}"), "grade": i32::from(i % 6 == q * 2),
            }));
        }
    }
    let a = post_json(
        &format!("{b}/admin/judgments"),
        t,
        &Value::Array(rows).to_string(),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let a = post_json(&format!("{b}/admin/train"), t, r#"{"epochs":3,"seed":2}"#);
    assert_eq!(a.status, 202, "{}", a.body);
    let job = wait_for_job(b, a.body["job"].as_i64().unwrap());
    assert_eq!(job["status"], "succeeded", "{job}");
    let model = job["result"]["model"].as_str().unwrap().to_string();
    let a = post_json(&format!("{b}/admin/models/{model}/activate"), t, "");
    assert_eq!(a.status, 200, "{}", a.body);
    let a = post_text(&format!("{b}/admin/queries"), t, "u1 socket matrix\n");
    assert_eq!(a.status, 200);

    let a = post_json(
        &format!("{b}/admin/label-batch"),
        t,
        r#"{"assessor":"ann","k":4}"#,
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["scored_by"], "reranker");
    assert_eq!(a.body["model"], model.as_str());
    // The judged queries' windows are fully judged: only u1 has unjudged pairs.
    assert!(pairs(&a.body).iter().all(|(q, _)| q == "u1"), "{}", a.body);
    assert_eq!(a.body["items"].as_array().unwrap().len(), 4);
}

/// `strategy: "loss"` picks by the loss-based criterion (seed 002 ch. 4): the judged pairs of
/// the windows fit its pairwise probabilities, each item says what it was picked on, the
/// batch is reserved like any other and never offers a judged pair.
#[test]
fn the_loss_based_batch_fits_on_the_judged_pairs() {
    let (_dir, _db, server) = setup();
    let b = &server.base;
    let t = Some(TOKEN);
    // Half of each topic's documents judged: the rest of the windows is the pool.
    let mut rows = Vec::new();
    for (q, topic) in ["vector", "thread", "parser"].iter().enumerate() {
        for i in (0..24).filter(|i| i % 2 == 0) {
            rows.push(serde_json::json!({
                "query_id": format!("t{q}"), "query": format!("{topic} basics"),
                "doc_id": format!("d{i}"), "grade": i32::from(topic_relevant(q * 2, i)),
            }));
        }
    }
    let a = post_json(
        &format!("{b}/admin/judgments"),
        t,
        &Value::Array(rows).to_string(),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let a = post_json(
        &format!("{b}/admin/label-batch"),
        t,
        r#"{"assessor":"ann","k":6,"strategy":"loss","alpha":2}"#,
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["strategy"], "loss");
    assert_eq!(
        (a.body["alpha"].as_f64(), a.body["beta"].as_f64()),
        (Some(2.0), Some(1.0))
    );
    let items = a.body["items"].as_array().unwrap();
    assert_eq!(items.len(), 6, "{}", a.body);
    for item in items {
        let doc: usize = item["doc_id"].as_str().unwrap()[1..].parse().unwrap();
        assert!(doc % 2 == 1, "a judged pair was offered: {item}");
        let p = item["p_correct"].as_f64().unwrap();
        assert!(p > 0.0 && p < 1.0, "{item}");
        let h = item["entropy"].as_f64().unwrap();
        assert!(
            (h + p * p.ln() + (1.0 - p) * (1.0 - p).ln()).abs() < 1e-9,
            "{item}"
        );
        assert!(item["margin"].is_null(), "{item}");
    }
    assert!(a.body["batch_id"].as_str().is_some());
}
