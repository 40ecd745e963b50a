//! Trust between a collection's nodes (issue 31): every `/cluster/v1/*` call needs the
//! cluster key, never the admin token; a leaf or root without a key does not start (but
//! with `--insecure-cluster` on loopback); the root keeps its clients' admin token; every
//! field of a leaf call is bounded as `/search` bounds its own (no allocation abort, no
//! panic); a deleted document is not readable through the leaf calls before its segment
//! merges.

use std::path::Path;

use crate::util::*;
use rankd::cluster::wire::{DocRef, StatsCall, PROTOCOL};
use rankd::text::query::AnalyzedQuery;
use rankd::text::stats::StatsRequest;
use rankd::text::IndexConfig;
use serde_json::{json, Value};

const LEAF_TOKEN: &str = "leaf-admin-token-0123456789";

/// Every route a leaf serves to its root, with a body it would accept.
const ROUTES: [(&str, &str); 11] = [
    ("GET", "info"),
    ("POST", "link_docs"),
    ("POST", "links"),
    ("POST", "stats"),
    ("POST", "table"),
    ("POST", "query"),
    ("POST", "features"),
    ("POST", "feedback"),
    ("POST", "hits"),
    ("POST", "documents"),
    ("POST", "documents/delete"),
];

fn leaf(data: &Path, token: Option<&str>) -> Server {
    start_serve(
        &["--role", "leaf", "--data-dir", data.to_str().unwrap()],
        token,
        &[],
    )
}

/// A cranfield collection split over 3 shards in `dir`; shard 0's data directory.
fn shard0(dir: &Path) -> std::path::PathBuf {
    let data = dir.join("sharded");
    ingest_into("cranfield", &cranfield_dir(), &data, Some(3));
    data.join("shards/0")
}

#[test]
fn every_cluster_route_refuses_callers_without_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let l = leaf(&shard0(dir.path()), Some(LEAF_TOKEN));
    for (method, route) in ROUTES {
        let url = format!("{}/cluster/v1/{route}", l.base);
        let body = (method == "POST").then_some(("application/json", &b"{}"[..]));
        for token in [None, Some(LEAF_TOKEN), Some("wrong-cluster-key-0123456789")] {
            let a = call(method, &url, token, body);
            assert_eq!(a.status, 401, "{method} {route} with {token:?}: {}", a.body);
            assert_eq!(a.body["error"]["code"], "unauthorized", "{}", a.body);
        }
        let a = call(method, &url, Some(CLUSTER_KEY), body);
        assert_ne!(a.status, 401, "{method} {route} with the key: {}", a.body);
    }
    let info = get(&format!("{}/cluster/v1/info", l.base), Some(CLUSTER_KEY));
    assert_eq!(info.status, 200, "{}", info.body);
}

/// A leaf or root needs a key, or `--insecure-cluster` on a loopback address.
#[test]
fn a_cluster_node_without_a_key_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = shard0(dir.path());
    let data = data.to_str().unwrap();
    let serve = |args: &[&str]| {
        rankd_command()
            .arg("serve")
            .args(args)
            .env_remove("RANKD_CLUSTER_KEY")
            .env_remove("RANKD_ADMIN_TOKEN")
            .env("RANKD_LOG", "error")
            .output()
            .unwrap()
    };
    for args in [
        vec![
            "--role",
            "leaf",
            "--data-dir",
            data,
            "--addr",
            "127.0.0.1:0",
        ],
        vec![
            "--role",
            "root",
            "--shard",
            "http://127.0.0.1:9",
            "--addr",
            "127.0.0.1:0",
        ],
    ] {
        let out = serve(&args);
        assert!(!out.status.success(), "{args:?} started without a key");
        assert!(
            stderr(&out).contains("needs the cluster key"),
            "{}",
            stderr(&out)
        );
    }
    let out = serve(&[
        "--role",
        "leaf",
        "--data-dir",
        data,
        "--addr",
        "0.0.0.0:0",
        "--insecure-cluster",
    ]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("loopback"), "{}", stderr(&out));
    // Loopback tests may run without one: every call is then answered.
    let l = start_serve(
        &["--role", "leaf", "--data-dir", data, "--insecure-cluster"],
        None,
        &[("RANKD_CLUSTER_KEY", "")],
    );
    assert_eq!(
        get(&format!("{}/cluster/v1/info", l.base), None).status,
        200
    );
    // A short key, or the admin token reused as the key: refused.
    for (key, token) in [("short", None), (LEAF_TOKEN, Some(LEAF_TOKEN))] {
        let mut cmd = rankd_command();
        cmd.args(["serve", "--role", "leaf", "--data-dir", data])
            .env("RANKD_CLUSTER_KEY", key)
            .env("RANKD_LOG", "error");
        if let Some(t) = token {
            cmd.env("RANKD_ADMIN_TOKEN", t);
        }
        let out = cmd.output().unwrap();
        assert!(!out.status.success(), "started with cluster key {key:?}");
    }
}

/// The root authenticates its clients with its admin token and writes to its leaves with the
/// cluster key: the leaves' own admin tokens differ from the root's, and writes go through.
#[test]
fn the_root_writes_with_the_cluster_key_not_its_admin_token() {
    const ROOT_TOKEN: &str = "root-admin-token-0123456789";
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("sharded");
    ingest_into("cranfield", &cranfield_dir(), &data, Some(3));
    let leaves: Vec<Server> = (0..3)
        .map(|s| leaf(&data.join(format!("shards/{s}")), Some(LEAF_TOKEN)))
        .collect();
    let mut args = vec!["--role", "root"];
    for l in &leaves {
        args.extend(["--shard", &l.base]);
    }
    let root = start_serve(
        &args,
        Some(ROOT_TOKEN),
        &[
            ("RANKD_ADMIN_AUTH_FAILURES_PER_MINUTE", "3"),
            ("RANKD_MAX_BODY_BYTES", "2000"),
        ],
    );
    let batch: String = (0..6)
        .map(|i| json!({"id": format!("trust-{i}"), "title": "qzxv", "body": "qzxv"}).to_string())
        .collect::<Vec<_>>()
        .join("\n");
    let url = format!("{}/admin/documents", root.base);
    let body = ("application/x-ndjson", batch.as_bytes());
    let a = call("POST", &url, Some(ROOT_TOKEN), Some(body));
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["indexed"], 6);
    let a = call("POST", &url, Some(LEAF_TOKEN), Some(body));
    assert_eq!(a.status, 401, "the leaves' token is no root's: {}", a.body);
    let url = format!("{}/admin/documents/delete", root.base);
    let a = post_json(&url, Some(ROOT_TOKEN), r#"{"ids": ["trust-0", "trust-1"]}"#);
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["deleted"], 2);
    root_guards_as_a_single_node(&root.base, ROOT_TOKEN);
}

/// A root's answers carry the single node's guards (issue 31, root parity): security
/// headers on the search page and its API, JSON errors for an unknown route and a wrong
/// method, a JSON 413 above `max_body_bytes`, and wrong admin tokens throttled per address
/// (429 with `Retry-After`, the right token refused too, searches unaffected).
fn root_guards_as_a_single_node(base: &str, token: &str) {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent();
    for path in ["/", "/static/search.js", "/search?q=boundary+layer"] {
        let r = agent.get(&format!("{base}{path}")).call().unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let h = |name: &str| {
            r.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_else(|| panic!("{path}: no {name}"))
                .to_string()
        };
        assert!(
            h("content-security-policy").contains("script-src 'self'"),
            "{path}"
        );
        assert_eq!(h("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(h("x-frame-options"), "DENY", "{path}");
    }
    let a = get(&format!("{base}/no/such/route"), None);
    assert_eq!(
        (a.status, &a.body["error"]["code"]),
        (404, &json!("not_found"))
    );
    let a = call("DELETE", &format!("{base}/search"), None, None);
    assert_eq!(a.status, 405, "{}", a.body);
    assert!(a.body["error"]["message"].is_string(), "{}", a.body);
    // Small enough for the client to finish writing before the server answers (a body far
    // above the limit is refused, and the connection closed, while it is still being sent).
    let big = "x".repeat(5_000);
    let url = format!("{base}/admin/documents");
    let a = call(
        "POST",
        &url,
        Some(token),
        Some(("application/x-ndjson", big.as_bytes())),
    );
    assert_eq!(a.status, 413, "{}", a.body);
    assert_eq!(a.body["error"]["code"], "payload_too_large", "{}", a.body);
    // The leaves' token sent above was the first of the three wrong ones allowed.
    for i in 0..2 {
        let a = post_json(&url, Some(&format!("wrong-root-token-{i:012}")), "{}");
        assert_eq!(a.status, 401, "attempt {i}: {}", a.body);
    }
    let a = post_json(&url, Some(token), "{}");
    assert_eq!(
        a.status, 429,
        "the right token is refused too while blocked: {}",
        a.body
    );
    assert_eq!(a.body["error"]["code"], "too_many_requests");
    let r = agent
        .post(&url)
        .header("Authorization", &format!("Bearer {token}"))
        .send("")
        .unwrap();
    assert_eq!(r.status(), 429);
    assert!(r.headers().contains_key("retry-after"));
    assert_eq!(get(&format!("{base}/search?q=wing"), None).status, 200);
}

/// A leaf's statistics call for `text` (every statistic a search reads): the pinned
/// generation and the statistics.
fn stats_of(base: &str, text: &str) -> (u64, Value) {
    let info = get(&format!("{base}/cluster/v1/info"), Some(CLUSTER_KEY));
    let config: IndexConfig = serde_json::from_value(info.body["config"].clone()).unwrap();
    let call = StatsCall {
        protocol: PROTOCOL,
        request: StatsRequest::for_query(&config, &AnalyzedQuery::new(text)).unwrap(),
        generation: None,
    };
    let a = post_json(
        &format!("{base}/cluster/v1/stats"),
        Some(CLUSTER_KEY),
        &serde_json::to_string(&call).unwrap(),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    (
        a.body["generation"].as_u64().unwrap(),
        a.body["stats"].clone(),
    )
}

fn query_call(generation: u64, stats: &Value, limit: Value) -> Value {
    json!({"protocol": PROTOCOL, "generation": generation, "text": "flow", "model": "bm25",
           "field": null, "limit": limit, "stats": stats})
}

fn leaf_call(base: &str, route: &str, body: &Value) -> Answer {
    post_json(
        &format!("{base}/cluster/v1/{route}"),
        Some(CLUSTER_KEY),
        &body.to_string(),
    )
}

/// `"limit": 2^40` aborted the leaf on an allocation of 8 TB; 2^64−1 and 2^63−1 panicked the
/// handler. Each is a 400 naming the field and its bound, as are lists longer than a search
/// reaches and a text longer than `/search` takes; the leaf serves on.
#[test]
fn leaf_calls_refuse_out_of_range_fields() {
    let dir = tempfile::tempdir().unwrap();
    let l = leaf(&shard0(dir.path()), None);
    let (generation, stats) = stats_of(&l.base, "flow");
    for limit in [
        json!(1u64 << 40),
        json!(u64::MAX),
        json!(i64::MAX as u64),
        json!(0),
    ] {
        let a = leaf_call(
            &l.base,
            "query",
            &query_call(generation, &stats, limit.clone()),
        );
        assert_eq!(a.status, 400, "limit {limit}: {}", a.body);
        assert_eq!(a.body["error"]["field"], "limit", "{}", a.body);
        let message = a.body["error"]["message"].as_str().unwrap();
        assert!(message.contains("10000"), "{message}");
    }
    let a = leaf_call(&l.base, "query", &query_call(generation, &stats, json!(10)));
    assert_eq!(a.status, 200, "{}", a.body);
    let mut long = query_call(generation, &stats, json!(10));
    long["text"] = json!("flow ".repeat(4000));
    let a = leaf_call(&l.base, "query", &long);
    assert_eq!(a.status, 400, "{}", a.body);
    assert_eq!(a.body["error"]["field"], "text", "{}", a.body);
    // Statistics without the query's terms: the caller's error, not the leaf's.
    let bare = json!({"num_docs": 10, "total_tokens": {}, "terms": {}});
    let a = leaf_call(&l.base, "query", &query_call(generation, &bare, json!(10)));
    assert_eq!(a.status, 400, "{}", a.body);
    assert_eq!(a.body["error"]["field"], "stats", "{}", a.body);
    // A df above the collection's size: tantivy's idf asserts against it.
    let mut absurd = stats.clone();
    for terms in absurd["terms"].as_object_mut().unwrap().values_mut() {
        for t in terms.as_object_mut().unwrap().values_mut() {
            t["df"] = json!(u64::MAX);
        }
    }
    let a = leaf_call(
        &l.base,
        "query",
        &query_call(generation, &absurd, json!(10)),
    );
    assert_eq!(a.status, 400, "{}", a.body);
    assert_eq!(a.body["error"]["field"], "stats", "{}", a.body);
    let many = vec![DocRef { segment: 0, doc: 0 }; 10_001];
    let hits = json!({"protocol": PROTOCOL, "generation": generation, "text": "flow",
                      "stats": stats, "url": true, "title": true, "snippet": false,
                      "docs": many});
    let a = leaf_call(&l.base, "hits", &hits);
    assert_eq!(a.status, 400, "{}", a.body);
    assert_eq!(a.body["error"]["field"], "docs", "{}", a.body);
    let feedback = json!({"protocol": PROTOCOL, "generation": generation, "docs": many});
    assert_eq!(leaf_call(&l.base, "feedback", &feedback).status, 400);
    assert_eq!(get(&format!("{}/livez", l.base), None).status, 200);
}

/// A document deleted on a leaf stays in its segment until a merge; a call naming it in a
/// later generation is refused, not answered with the deleted document's fields or terms.
#[test]
fn deleted_documents_are_not_readable_through_leaf_calls() {
    let dir = tempfile::tempdir().unwrap();
    let l = leaf(&shard0(dir.path()), Some(LEAF_TOKEN));
    let (generation, stats) = stats_of(&l.base, "flow");
    let a = leaf_call(&l.base, "query", &query_call(generation, &stats, json!(3)));
    assert_eq!(a.status, 200, "{}", a.body);
    let top = &a.body["hits"][0];
    let (id, doc) = (top["id"].as_str().unwrap(), top["doc"].clone());
    let hits = |generation: u64, stats: &Value| {
        json!({"protocol": PROTOCOL, "generation": generation, "text": "flow",
               "stats": stats, "url": true, "title": true, "snippet": true, "docs": [doc]})
    };
    let a = leaf_call(&l.base, "hits", &hits(generation, &stats));
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["hits"][0]["id"], id);
    let deleted = post_json(
        &format!("{}/admin/documents/delete", l.base),
        Some(LEAF_TOKEN),
        &json!({ "ids": [id] }).to_string(),
    );
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    let (after, stats) = stats_of(&l.base, "flow");
    assert_ne!(after, generation);
    let a = leaf_call(&l.base, "hits", &hits(after, &stats));
    assert_eq!(a.status, 400, "a deleted document's fields: {}", a.body);
    let feedback = json!({"protocol": PROTOCOL, "generation": after, "docs": [doc]});
    let a = leaf_call(&l.base, "feedback", &feedback);
    assert_eq!(a.status, 400, "a deleted document's terms: {}", a.body);
}

/// TLS between nodes (issue 31): leaves serve HTTPS with a certificate of a private CA, and
/// a root given that CA (`--tls-ca`) searches them, its cluster key encrypted on the way; a
/// root that does not trust the CA reaches none of them and says why; a leaf's plain-HTTP
/// port answers no HTTP.
#[test]
fn a_root_searches_leaves_over_tls_with_the_ca_it_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("sharded");
    ingest_into("cranfield", &cranfield_dir(), &data, Some(3));
    let tls = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls");
    let file = |name: &str| tls.join(name).to_str().unwrap().to_string();
    let (cert, key, ca) = (file("leaf.pem"), file("leaf.key"), file("ca.pem"));
    let leaves: Vec<Server> = (0..3)
        .map(|s| {
            let shard = data.join(format!("shards/{s}"));
            start_serve(
                &[
                    "--role",
                    "leaf",
                    "--data-dir",
                    shard.to_str().unwrap(),
                    "--tls-cert",
                    &cert,
                    "--tls-key",
                    &key,
                ],
                None,
                &[],
            )
        })
        .collect();
    for l in &leaves {
        assert!(l.base.starts_with("https://127.0.0.1:"), "{}", l.base);
        // Plain HTTP on the TLS port: no answer.
        let plain = l.base.replacen("https://", "http://", 1);
        assert!(
            ureq::get(&format!("{plain}/livez")).call().is_err(),
            "a TLS leaf answered plain HTTP"
        );
    }
    let mut args = vec!["--role", "root", "--tls-ca", &ca];
    for l in &leaves {
        args.extend(["--shard", &l.base]);
    }
    let root = start_serve(&args, None, &[]);
    let a = get(&format!("{}/search?q=boundary+layer&k=5", root.base), None);
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["hits"].as_array().unwrap().len(), 5, "{}", a.body);
    assert_eq!(a.body["partial"], false, "{}", a.body);
    // Without the CA: the system's roots do not know it.
    let mut untrusting = rankd_command();
    untrusting
        .args([
            "serve",
            "--role",
            "root",
            "--addr",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(dir.path().join("untrusting"))
        .env("RANKD_LOG", "error")
        .env_remove("RANKD_TLS_CA");
    for l in &leaves {
        untrusting.args(["--shard", &l.base]);
    }
    let out = untrusting.output().unwrap();
    assert!(!out.status.success());
    let said = stderr(&out);
    assert!(said.contains("certificate"), "{said}");
}
