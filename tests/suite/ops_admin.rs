//! The admin API against a real `rankd serve` process over HTTP, on SQLite or (with
//! `RANKD_TEST_DATABASE_URL`) PostgreSQL: authentication of every route listed in the
//! server's own OpenAPI document, each admin operation, bad input on every route (a 4xx
//! naming the problem, the database and index unchanged), and jobs across a restart.

use crate::util::*;
use serde_json::Value;

/// Every admin (method, path) the server documents, path parameters filled in.
fn admin_routes(base: &str) -> Vec<(String, String)> {
    let doc = get(&format!("{base}/openapi.json"), None);
    assert_eq!(doc.status, 200);
    let mut routes = Vec::new();
    for (path, item) in doc.body["paths"].as_object().unwrap() {
        if !path.starts_with("/admin") {
            continue;
        }
        for method in ["get", "post", "put", "patch", "delete"] {
            if item.get(method).is_some() {
                let filled = path.replace("{id}", "1").replace("{doc_id}", "vec");
                routes.push((method.to_uppercase(), filled));
            }
        }
    }
    routes
}

#[test]
fn every_admin_route_needs_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let data = ingest(dir.path(), DOCS);
    let db = fresh_database(dir.path());
    let server = start(&data, &db, Some(TOKEN));
    let b = &server.base;
    let routes = admin_routes(b);
    // The document must cover what this suite exercises; a new route joins automatically.
    assert!(routes.len() >= 14, "{routes:?}");
    for (_, path) in &routes {
        assert!(path.starts_with("/admin/"), "{path}");
    }
    let before = snapshot(&db);
    let mut unknown = routes.clone();
    unknown.push(("GET".into(), "/admin/no-such-route".into()));
    unknown.push(("DELETE".into(), "/admin/jobs".into()));
    for (method, path) in &unknown {
        for token in [None, Some("wrong-token-0123456789"), Some("")] {
            let a = call(
                method,
                &format!("{b}{path}"),
                token,
                Some(("application/json", b"{\"ids\":[\"vec\"]}")),
            );
            assert_eq!(a.status, 401, "{method} {path} with {token:?}: {}", a.body);
            assert_eq!(a.body["error"]["code"], "unauthorized", "{method} {path}");
            assert!(
                a.www_authenticate
                    .as_deref()
                    .unwrap_or("")
                    .starts_with("Bearer"),
                "{method} {path}"
            );
        }
    }
    assert_eq!(snapshot(&db), before);
    // Nothing was deleted by the unauthenticated delete calls.
    assert_eq!(get(&format!("{b}/doc/vec"), None).status, 200);
    // A lowercase scheme or a token with a suffix is still wrong.
    let a = call(
        "GET",
        &format!("{b}/admin/jobs"),
        Some(&format!("{TOKEN}x")),
        None,
    );
    assert_eq!(a.status, 401);
    assert_eq!(get(&format!("{b}/admin/jobs"), Some(TOKEN)).status, 200);
}

#[test]
fn admin_api_is_disabled_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let data = ingest(dir.path(), DOCS);
    let db = fresh_database(dir.path());
    let server = start(&data, &db, None);
    let a = get(&format!("{}/admin/jobs", server.base), Some(TOKEN));
    assert_eq!(a.status, 503, "{}", a.body);
    assert_eq!(a.body["error"]["code"], "admin_disabled");
    assert!(a.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("RANKD_ADMIN_TOKEN"));
    // The public API is unaffected.
    assert_eq!(
        get(&format!("{}/search?q=capacity", server.base), None).status,
        200
    );
}

fn hits(base: &str, q: &str) -> Vec<String> {
    let a = get(&format!("{base}/search?q={q}&k=20"), None);
    assert_eq!(a.status, 200, "{}", a.body);
    a.body["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn document_batches_are_atomic_and_served_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = ingest(dir.path(), DOCS);
    let db = fresh_database(dir.path());
    let server = start(&data, &db, Some(TOKEN));
    let b = &server.base;
    let t = Some(TOKEN);
    let ndjson = |s: &str| {
        call(
            "POST",
            &format!("{b}/admin/documents"),
            t,
            Some(("application/x-ndjson", s.as_bytes())),
        )
    };

    // Add one and update one (same id) in a batch: searchable right after the answer.
    let a = ndjson(concat!(
        r#"{"id":"deque","title":"VecDeque","body":"A double-ended queue implemented with a growable ring buffer."}"#,
        "\n",
        r#"{"id":"map","title":"HashMap","body":"A hash map keyed by zebras."}"#,
        "\n"
    ));
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["indexed"], 2);
    assert_eq!(a.body["documents"], 4);
    assert_eq!(hits(b, "ring+buffer"), vec!["deque"]);
    assert_eq!(hits(b, "zebras"), vec!["map"]);
    assert_eq!(hits(b, "capacity"), vec!["vec"]);

    // A bad third line rejects the batch; the good lines before it are not indexed.
    let bad = concat!(
        r#"{"id":"a1","body":"unicorn"}"#,
        "\n",
        r#"{"id":"a2","body":"unicorn"}"#,
        "\n",
        r#"{"id":"a3","body":42}"#,
        "\n"
    );
    let a = ndjson(bad);
    assert_error(&a, 400, Some("body"), "line 3");
    assert!(a.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("`body` must be a string"));
    for (body, says) in [
        ("{not json}\n", "line 1"),
        ("\n\n[1,2]\n", "line 3"),
        ("{\"title\":\"no id\"}", "missing `id`"),
        ("", "no documents"),
        ("{\"id\":\"u\",\"url\":\"not a url\"}", "absolute URL"),
    ] {
        assert_error(&ndjson(body), 400, Some("body"), says);
    }
    let a = call(
        "POST",
        &format!("{b}/admin/documents"),
        t,
        Some(("application/x-ndjson", b"{\"id\":\"\xff\"}")),
    );
    assert_error(&a, 400, Some("body"), "UTF-8");
    assert!(hits(b, "unicorn").is_empty());
    assert_eq!(get(&format!("{b}/doc/a1"), None).status, 404);

    // Deletes: all ids must exist, else nothing is deleted.
    let del = |body: &str| post_json(&format!("{b}/admin/documents/delete"), t, body);
    assert_error(
        &del(r#"{"ids":["vec","nope"]}"#),
        404,
        Some("ids[1]"),
        "nope",
    );
    assert_eq!(get(&format!("{b}/doc/vec"), None).status, 200);
    assert_error(&del(r#"{"ids":[]}"#), 400, Some("ids"), "empty");
    assert_error(&del(r#"{"ids":"vec"}"#), 400, Some("ids"), "invalid type");
    assert_error(&del(r#"{"ids":[7]}"#), 400, Some("ids[0]"), "invalid type");
    assert_error(
        &del(r#"{"ids":["vec"],"force":true}"#),
        400,
        Some("force"),
        "unknown field",
    );
    assert_error(&del(r#"{"ids":["  "]}"#), 400, Some("ids[0]"), "empty");
    assert_error(&del("not json"), 400, Some("body"), "invalid JSON");
    assert_eq!(get(&format!("{b}/doc/vec"), None).status, 200);
    let a = del(r#"{"ids":["vec","deque"]}"#);
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["deleted"], 2);
    assert_eq!(a.body["documents"], 2);
    assert_eq!(get(&format!("{b}/doc/vec"), None).status, 404);
    assert!(hits(b, "capacity").iter().all(|id| id != "vec"));
    // A deleted document is unknown to a second delete.
    assert_error(&del(r#"{"ids":["vec"]}"#), 404, Some("ids[0]"), "vec");
}

#[test]
fn judgments_queries_and_evaluation() {
    let dir = tempfile::tempdir().unwrap();
    let data = ingest(dir.path(), DOCS);
    let db = fresh_database(dir.path());
    let server = start(&data, &db, Some(TOKEN));
    let b = &server.base;
    let t = Some(TOKEN);

    // Nothing to evaluate yet.
    let eval = |body: &str| post_json(&format!("{b}/admin/evaluate"), t, body);
    assert_error(&eval(r#"{"model":"bm25"}"#), 409, None, "no judgments");

    let add = |body: &str| post_json(&format!("{b}/admin/judgments"), t, body);
    let empty = snapshot(&db);
    for (body, field, says) in [
        (
            r#"{"query_id":"q1","query":"capacity","doc_id":"vec","grade":"high"}"#,
            "grade",
            "invalid type",
        ),
        (
            r#"{"query_id":"q1","query":"capacity","doc_id":"vec"}"#,
            "body",
            "missing field `grade`",
        ),
        (
            r#"{"query_id":"q1","query":"capacity","doc_id":"vec","grade":-1}"#,
            "grade",
            "negative",
        ),
        (
            r#"{"query_id":"q1","query":"capacity","doc_id":"nope","grade":1}"#,
            "doc_id",
            "no document",
        ),
        (
            r#"{"query_id":"q1","doc_id":"vec","grade":1}"#,
            "query",
            "is new",
        ),
        (
            r#"{"query_id":"","query":"capacity","doc_id":"vec","grade":1}"#,
            "query_id",
            "empty",
        ),
        (
            r#"{"query_id":"q1","query":"capacity","doc_id":"vec","grade":1,"colour":"red"}"#,
            "colour",
            "unknown field",
        ),
        (
            r#"[{"query_id":"q1","query":"capacity","doc_id":"vec","grade":1},{"query_id":"q1","doc_id":"nope","grade":1}]"#,
            "[1].doc_id",
            "no document",
        ),
        (
            r#"[{"query_id":"q1","query":"capacity","doc_id":"vec","grade":1},{"query_id":"q1","doc_id":"map","grade":2.5}]"#,
            "[1].grade",
            "invalid type",
        ),
        (r#"[]"#, "body", "no judgments"),
        (r#"17"#, "body", "expected a judgment"),
    ] {
        assert_error(&add(body), 400, Some(field), says);
    }
    assert_eq!(snapshot(&db), empty, "a rejected request stored something");

    // A batch: the second item reuses q1's text from the first.
    let a = add(
        r#"[{"query_id":"q1","query":"capacity","doc_id":"map","grade":2},{"query_id":"q1","doc_id":"iter","grade":0,"source":"alice"}]"#,
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["stored"], 2);
    // Later judgments of a known query need no text; a re-judged pair is replaced.
    assert_eq!(
        add(r#"{"query_id":"q1","doc_id":"iter","grade":1}"#).status,
        200
    );

    // Qrels: malformed line or unknown document rejects the import.
    let qrels =
        |body: &str, query: &str| post_text(&format!("{b}/admin/judgments/qrels{query}"), t, body);
    let stored = snapshot(&db);
    assert_error(&qrels("q2 0 vec\n", ""), 400, Some("body"), "qrels:1:");
    assert_error(
        &qrels("q2 0 vec 1\nq2 0 iter one\n", ""),
        400,
        Some("body"),
        "qrels:2:",
    );
    assert_error(
        &qrels("q2 0 vec 1\nq2 0 ghost 1\n", ""),
        400,
        Some("body"),
        "ghost",
    );
    assert_error(&qrels("", ""), 400, Some("body"), "no qrels");
    assert_error(
        &qrels("q2 0 vec 1\n", "?skip_unknown=maybe"),
        400,
        Some("skip_unknown"),
        "invalid",
    );
    assert_error(
        &qrels("q2 0 vec 1\n", "?colour=red"),
        400,
        Some("colour"),
        "unknown parameter",
    );
    assert_eq!(snapshot(&db), stored, "a rejected import stored something");
    let a = qrels(
        "q2 0 vec 1\nq2 0 ghost 1\nq2 0 map 0\n",
        "?skip_unknown=true",
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["stored"], 2);
    assert_eq!(a.body["skipped_unknown"], 1);
    assert_eq!(a.body["queries_without_text"], serde_json::json!(["q2"]));

    // Listing, by query and paginated.
    let list = |q: &str| get(&format!("{b}/admin/judgments{q}"), t);
    let a = list("");
    assert_eq!(a.body["total"], 4);
    let a = list("?query_id=q1&limit=1&offset=1");
    assert_eq!(a.body["total"], 2);
    let page = a.body["judgments"].as_array().unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(page[0]["doc_id"], "map");
    assert_eq!(page[0]["grade"], 2);
    assert_eq!(page[0]["query"], "capacity");
    let first = list("?query_id=q1&limit=1");
    assert_eq!(first.body["judgments"][0]["doc_id"], "iter");
    assert_eq!(
        first.body["judgments"][0]["grade"], 1,
        "re-judging replaces the grade"
    );
    assert_eq!(first.body["judgments"][0]["source"], "api");
    for (q, field) in [
        ("?limit=0", "limit"),
        ("?limit=x", "limit"),
        ("?offset=-1", "offset"),
        ("?page=2", "page"),
    ] {
        assert_error(&list(q), 400, Some(field), "");
    }

    // Evaluation: q2 has no text yet and is skipped; q1 "capacity" is scored. The expected
    // value comes from the public search answer: AP with the relevant documents' ranks.
    let ranking = hits_with("bm25", b, "capacity");
    let a = eval(r#"{"model":"bm25","depth":100}"#);
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["skipped_queries"], serde_json::json!(["q2"]));
    assert_eq!(a.body["queries"], 1);
    // q1: relevant = map (2) and iter (1); iter does not contain "capacity" (not retrieved).
    // Ranks follow trec_eval's order: score descending, ties by document id descending.
    let map_rank = ranking.iter().position(|(d, _)| d == "map").unwrap() + 1;
    let expected_ap = (1.0 / map_rank as f64) / 2.0;
    let map = a.body["map"].as_f64().unwrap();
    assert!(
        (map - expected_ap).abs() < 1e-9,
        "map {map} vs {expected_ap}: {}",
        a.body
    );

    // Query texts for qrels-only queries; then q2 is evaluated too.
    assert_error(
        &post_text(&format!("{b}/admin/queries"), t, "q3\n"),
        400,
        Some("body"),
        "line 1",
    );
    assert_error(
        &post_text(&format!("{b}/admin/queries"), t, "\n"),
        400,
        Some("body"),
        "no queries",
    );
    let a = post_text(&format!("{b}/admin/queries"), t, "q2 contiguous array\n");
    assert_eq!(a.status, 200, "{}", a.body);
    let a = eval(r#"{"model":"bm25"}"#);
    assert_eq!(a.body["queries"], 2, "{}", a.body);
    assert_eq!(a.body["skipped_queries"], serde_json::json!([]));

    let before = snapshot(&db);
    for (body, status, field) in [
        (r#"{"model":"bm99"}"#, 400, "model"),
        (r#"{"model":"bm25","depth":0}"#, 400, "depth"),
        (r#"{"model":"bm25","depth":"deep"}"#, 400, "depth"),
        (r#"{"model":"bm25","field":"colour"}"#, 400, "field"),
        (r#"{"modle":"bm25"}"#, 400, "modle"),
        (r#"{}"#, 400, "body"),
    ] {
        assert_error(&eval(body), status, Some(field), "");
    }
    assert_eq!(snapshot(&db), before);
}

/// The hits of a public search as (id, score), in trec_eval's order.
fn hits_with(model: &str, base: &str, q: &str) -> Vec<(String, f64)> {
    let a = get(&format!("{base}/search?q={q}&k=100&model={model}"), None);
    let mut hits = hit_scores(&a.body);
    hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    hits
}

#[test]
fn seeds_graph_job_and_cancellation() {
    let dir = tempfile::tempdir().unwrap();
    let data = ingest(dir.path(), DOCS);
    let db = fresh_database(dir.path());
    let server = start(&data, &db, Some(TOKEN));
    let b = &server.base;
    let t = Some(TOKEN);

    // No link scores until the graph job has run.
    assert!(get(&format!("{b}/doc/vec"), None).body["link_scores"].is_null());

    let before = snapshot(&db);
    let seeds = |body: &str| post_json(&format!("{b}/admin/seeds"), t, body);
    assert_error(
        &seeds(r#"{"ids":["vec","nope"]}"#),
        400,
        Some("ids[1]"),
        "nope",
    );
    assert_error(&seeds(r#"{"ids":[]}"#), 400, Some("ids"), "empty");
    assert_error(
        &seeds(r#"{"ids":[1]}"#),
        400,
        Some("ids[0]"),
        "invalid type",
    );
    assert_error(&seeds(r#""vec""#), 400, Some("body"), "invalid type");
    let del = call("DELETE", &format!("{b}/admin/seeds/nope"), t, None);
    assert_error(&del, 404, None, "not a TrustRank seed");
    assert_eq!(snapshot(&db), before);

    let a = seeds(r#"{"ids":["vec","map"]}"#);
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["added"], 2);
    let a = seeds(r#"{"ids":["vec"]}"#);
    assert_eq!(a.body["added"], 0, "adding a seed twice keeps one");
    assert_eq!(a.body["seeds"], 2);
    assert_eq!(
        call("DELETE", &format!("{b}/admin/seeds/map"), t, None).status,
        200
    );
    let listed = get(&format!("{b}/admin/seeds"), t);
    let ids: Vec<&str> = listed.body["seeds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["doc_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["vec"]);

    // The graph job with the stored seed; its scores are served once it succeeds.
    let a = call("POST", &format!("{b}/admin/graph"), t, None);
    assert_eq!(a.status, 202, "{}", a.body);
    let id = a.body["job"].as_i64().unwrap();
    let job = wait_for_job(b, id);
    assert_eq!(job["status"], "succeeded", "{job}");
    assert_eq!(job["kind"], "graph");
    assert_eq!(job["progress"], 1.0);
    assert_eq!(job["params"]["seeds"], serde_json::json!(["vec"]));
    assert_eq!(job["result"]["nodes"], 3);
    assert_eq!(job["result"]["edges"], 4);
    assert!(job["logs"].as_array().unwrap().len() >= 2, "{job}");
    let scores = get(&format!("{b}/doc/vec"), None).body["link_scores"].clone();
    assert!(scores["pagerank"].as_f64().unwrap() > 0.0, "{scores}");
    // The only seed has all the trust mass it keeps after propagation.
    let trust_iter = get(&format!("{b}/doc/iter"), None).body["link_scores"]["trustrank"]
        .as_f64()
        .unwrap();
    assert!(scores["trustrank"].as_f64().unwrap() > trust_iter);
    assert_eq!(
        get(&format!("{b}/search?q=capacity&boost=pagerank"), None).status,
        200
    );

    // Cancelling: unknown, malformed, finished.
    let cancel = |id: &str| call("POST", &format!("{b}/admin/jobs/{id}/cancel"), t, None);
    let before = snapshot(&db);
    assert_error(&cancel("999"), 404, None, "no job");
    assert_error(&cancel("abc"), 400, Some("id"), "positive integer");
    assert_error(&cancel("-1"), 400, Some("id"), "positive integer");
    assert_error(&cancel(&id.to_string()), 409, None, "already finished");
    assert_error(&get(&format!("{b}/admin/jobs/999"), t), 404, None, "no job");
    assert_error(&get(&format!("{b}/admin/jobs/x"), t), 400, Some("id"), "");
    assert_error(
        &get(&format!("{b}/admin/jobs?kind=sleep"), t),
        400,
        Some("kind"),
        "unknown job kind",
    );
    assert_error(
        &get(&format!("{b}/admin/jobs?status=done"), t),
        400,
        Some("status"),
        "unknown job status",
    );
    assert_eq!(snapshot(&db), before);

    // A running job (as another process or an earlier request would have left it): the
    // first cancel is accepted, the second is a conflict, and the row says so.
    sql(&db, "INSERT INTO jobs (kind, params, status, created_at, started_at) VALUES ('train', '{}', 'running', 0, 0)");
    let running = column(
        &db,
        "SELECT CAST(id AS TEXT) FROM jobs WHERE kind = 'train'",
    )[0]
    .clone();
    let a = cancel(&running);
    assert_eq!(a.status, 202, "{}", a.body);
    assert_error(&cancel(&running), 409, None, "already requested");
    assert_eq!(
        column(
            &db,
            &format!("SELECT CAST(cancel_requested AS TEXT) FROM jobs WHERE id = {running}")
        ),
        vec!["1"]
    );
    // A queued job is cancelled outright.
    sql(
        &db,
        "INSERT INTO jobs (kind, params, status, created_at) VALUES ('eval', '{}', 'queued', 0)",
    );
    let queued = column(&db, "SELECT CAST(id AS TEXT) FROM jobs WHERE kind = 'eval'")[0].clone();
    assert_eq!(cancel(&queued).status, 200);
    assert_error(&cancel(&queued), 409, None, "cancelled");
    let listed = get(&format!("{b}/admin/jobs?status=cancelled"), t);
    assert_eq!(listed.body["total"], 1, "{}", listed.body);
    assert_eq!(listed.body["jobs"][0]["kind"], "eval");
    let listed = get(&format!("{b}/admin/jobs?kind=graph&limit=5"), t);
    assert_eq!(listed.body["total"], 1);

    // One job per kind at a time: the running 'train' row blocks nothing of kind graph, but
    // a graph row staged as running makes a new graph job a conflict.
    sql(
        &db,
        "INSERT INTO jobs (kind, params, status, created_at) VALUES ('graph', '{}', 'running', 0)",
    );
    let before = snapshot(&db);
    assert_error(
        &call("POST", &format!("{b}/admin/graph"), t, None),
        409,
        None,
        "already queued or running",
    );
    assert_eq!(snapshot(&db), before);
}

#[test]
fn a_restart_fails_interrupted_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let data = ingest(dir.path(), DOCS);
    let db = fresh_database(dir.path());
    let server = start(&data, &db, Some(TOKEN));
    let a = call(
        "POST",
        &format!("{}/admin/graph", server.base),
        Some(TOKEN),
        None,
    );
    let done = wait_for_job(&server.base, a.body["job"].as_i64().unwrap());
    assert_eq!(done["status"], "succeeded");
    server.stop();

    // What a crash mid-job leaves behind.
    sql(&db, "INSERT INTO jobs (kind, params, status, progress, created_at, started_at) VALUES ('train', '{}', 'running', 0.5, 0, 0)");
    sql(
        &db,
        "INSERT INTO jobs (kind, params, status, created_at) VALUES ('graph', '{}', 'queued', 0)",
    );

    let server = start(&data, &db, Some(TOKEN));
    let jobs = get(&format!("{}/admin/jobs", server.base), Some(TOKEN));
    let jobs = jobs.body["jobs"].as_array().unwrap().clone();
    assert_eq!(jobs.len(), 3);
    let by_status = |s: &str| {
        jobs.iter()
            .filter(|j| j["status"] == s)
            .cloned()
            .collect::<Vec<Value>>()
    };
    assert_eq!(
        by_status("succeeded").len(),
        1,
        "a finished job keeps its status"
    );
    let failed = by_status("failed");
    assert_eq!(failed.len(), 2, "{jobs:?}");
    for j in failed {
        assert_eq!(j["error"], "interrupted by restart");
        assert!(j["finished_at"].is_string());
    }
    assert!(column(&db, "SELECT status FROM jobs")
        .iter()
        .all(|s| s != "running" && s != "queued"));
    // And a new graph job may start: the interrupted one no longer holds the slot.
    let a = call(
        "POST",
        &format!("{}/admin/graph", server.base),
        Some(TOKEN),
        None,
    );
    assert_eq!(a.status, 202, "{}", a.body);
    let done = wait_for_job(&server.base, a.body["job"].as_i64().unwrap());
    assert_eq!(done["status"], "succeeded");
}

#[test]
fn oversized_bodies_are_json_413s_from_the_configured_limit() {
    let dir = tempfile::tempdir().unwrap();
    let data = ingest(dir.path(), DOCS);
    let db = fresh_database(dir.path());
    let server = start_with_env(&data, &db, Some(TOKEN), &[("RANKD_MAX_BODY_BYTES", "1000")]);
    let b = &server.base;
    let big = format!("{{\"id\":\"big\",\"body\":\"{}\"}}", "z".repeat(2000));
    let before = snapshot(&db);
    for path in [
        "documents",
        "judgments",
        "judgments/qrels",
        "seeds",
        "evaluate",
    ] {
        let a = post_json(&format!("{b}/admin/{path}"), Some(TOKEN), &big);
        assert_error(&a, 413, Some("body"), "length limit");
        assert_eq!(a.body["error"]["code"], "payload_too_large");
    }
    assert_eq!(snapshot(&db), before);
    assert_eq!(get(&format!("{b}/doc/big"), None).status, 404);
    // Below the limit the same route works.
    let small = r#"{"id":"small","body":"tiny"}"#;
    assert_eq!(
        post_json(&format!("{b}/admin/documents"), Some(TOKEN), small).status,
        200
    );
}
