//! The model registry and training over HTTP against a real server, on SQLite or PostgreSQL
//! (`RANKD_TEST_DATABASE_URL`): training on stored judgments, activation (hot swap seen by
//! `/search`), rollback, deletion, and every bad request leaving the database unchanged.

mod ops_support;

use ops_support::*;

fn assert_error(a: &Answer, status: u16, says: &str) {
    assert_eq!(a.status, status, "{}", a.body);
    let message = a.body["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains(says), "expected {says:?} in {}", a.body);
}

fn train(b: &str, body: &str) -> String {
    let a = post_json(&format!("{b}/admin/train"), Some(TOKEN), body);
    assert_eq!(a.status, 202, "{}", a.body);
    let job = wait_for_job(b, a.body["job"].as_i64().unwrap());
    assert_eq!(job["status"], "succeeded", "{job}");
    assert_eq!(job["progress"], 1.0, "{job}");
    job["result"]["model"].as_str().unwrap().to_string()
}

#[test]
fn train_activate_roll_back_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let docs = topic_corpus(false);
    let refs: Vec<&str> = docs.iter().map(String::as_str).collect();
    let data = ingest(dir.path(), &refs);
    let db = fresh_database(dir.path());
    let server = start(&data, &db, Some(TOKEN));
    let b = &server.base;
    let t = Some(TOKEN);

    // Training without judgments: 400, nothing stored.
    let before = snapshot(&db);
    assert_error(
        &post_json(&format!("{b}/admin/train"), t, "{}"),
        400,
        "judged queries",
    );
    assert_eq!(snapshot(&db), before);
    // Bad parameters: named, nothing stored.
    for (body, says) in [
        (r#"{"model":"forest"}"#, "unknown model"),
        (r#"{"lr":-1}"#, "lr must be"),
        (r#"{"epochs":0}"#, "epochs must be"),
        (r#"{"objective":"magic"}"#, "unknown variant `magic`"),
        (r#"{"colour":"red"}"#, "unknown field"),
        ("{", "JSON"),
    ] {
        let a = post_json(&format!("{b}/admin/train"), t, body);
        assert_eq!(a.status, 400, "{body}: {}", a.body);
        assert!(
            a.body["error"]["message"].as_str().unwrap().contains(says),
            "{body}: {}",
            a.body
        );
    }
    assert_eq!(snapshot(&db), before);

    let a = post_json(&format!("{b}/admin/judgments"), t, &topic_judgments());
    assert_eq!(a.status, 200, "{}", a.body);
    let first = train(b, r#"{"model":"linear","epochs":15,"lr":0.01}"#);
    let second = train(
        b,
        r#"{"model":"mlp","epochs":10,"objective":"ranknet","seed":2}"#,
    );
    assert_ne!(first, second);

    let models = get(&format!("{b}/admin/models"), t);
    assert_eq!(models.status, 200);
    assert_eq!(models.body["active"], serde_json::Value::Null);
    let list = models.body["models"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert!(list.iter().all(|m| m["status"] == "inactive"));
    assert!(
        list.iter()
            .all(|m| m["metrics"]["valid"]["map"].is_number()),
        "{list:?}"
    );
    assert!(list
        .iter()
        .all(|m| !m["log"].as_array().unwrap().is_empty()));

    // Nothing active: first-phase results.
    let search = || get(&format!("{b}/search?q=vector+basics"), None).body["reranker"].clone();
    assert_eq!(search(), serde_json::Value::Null);
    // Activate, then the other, then roll back.
    let act = |id: &str| post_json(&format!("{b}/admin/models/{id}/activate"), t, "");
    assert_eq!(act(&first).status, 200);
    assert_eq!(search(), first.as_str());
    assert_error(&act(&first), 409, "already active");
    assert_error(&act("nope"), 404, "no model");
    assert_eq!(act(&second).status, 200);
    assert_eq!(search(), second.as_str());
    let rb = post_json(&format!("{b}/admin/models/rollback"), t, "");
    assert_eq!(rb.status, 200, "{}", rb.body);
    assert_eq!(rb.body["active"], first.as_str());
    assert_eq!(search(), first.as_str());
    // rerank=false still gives the first phase.
    let fp = get(&format!("{b}/search?q=vector+basics&rerank=false"), None);
    assert_eq!(fp.body["reranker"], serde_json::Value::Null);
    // Explanations carry the features and (linear) contributions.
    let ex = get(&format!("{b}/search?q=vector+basics&explain=true"), None);
    let e = &ex.body["hits"][0]["explain"];
    assert!(e["features"]["bm25f"].is_number(), "{e}");
    assert!(e["contributions"]["bm25f"].is_number(), "{e}");

    // The active model cannot be deleted; the inactive one can, once.
    let del = |id: &str| call("DELETE", &format!("{b}/admin/models/{id}"), t, None);
    let before = snapshot(&db);
    assert_error(&del(&first), 409, "active");
    assert_eq!(snapshot(&db), before);
    assert_eq!(del(&second).status, 204);
    assert_error(&del(&second), 404, "no model");
    // With the other deleted there is nothing to roll back to.
    assert_error(
        &post_json(&format!("{b}/admin/models/rollback"), t, ""),
        409,
        "roll back",
    );

    // A restart serves the same active model.
    server.stop();
    let server = start(&data, &db, Some(TOKEN));
    let b = &server.base;
    let r = get(&format!("{b}/search?q=vector+basics"), None);
    assert_eq!(r.body["reranker"], first.as_str());
    let m = get(&format!("{b}/metrics"), None);
    assert!(m
        .body
        .as_str()
        .unwrap()
        .contains(&format!("model=\"{first}\"")));
}
