//! The HTTP API against a real `rankd serve` process: bad requests are JSON 4xx errors that
//! name the parameter, the server keeps serving, and SIGTERM shuts it down cleanly.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::{get, ingest, rankd_ok, start_serve, Answer, Server, DOCS};

/// The three documents of [`DOCS`] and one whose id holds slashes, ingested with link scores.
fn corpus(dir: &Path) -> PathBuf {
    let mut docs = DOCS.to_vec();
    docs.push(
        r#"{"id":"std/slash/page.html","title":"Nested","body":"An id with slashes in it."}"#,
    );
    let data = ingest(dir, &docs);
    rankd_ok(["graph", "--data-dir", data.to_str().unwrap(), "--json"]);
    data
}

fn start(data: &Path) -> Server {
    start_serve(&["--data-dir", data.to_str().unwrap()], None, &[])
}

#[test]
fn search_doc_similar_and_every_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(&corpus(dir.path()));
    let b = &server.base;

    let Answer { status, body, .. } = get(&format!("{b}/search?q=capacity&k=5"), None);
    assert_eq!(status, 200);
    assert_eq!(body["total_hits"], 2);
    assert_eq!(body["model"], "bm25f");
    let snippet = body["hits"][0]["snippet"].as_str().unwrap();
    assert!(snippet.contains("<b>capacity</b>"), "{snippet}");

    let Answer { status, body, .. } = get(
        &format!("{b}/search?q=capacity&model=lm&explain=true&boost=pagerank"),
        None,
    );
    assert_eq!(status, 200, "{body}");
    let explain = &body["hits"][0]["explain"];
    assert!(explain["links"]["pagerank"].is_number(), "{body}");
    // The typed explanation: the first phase's tree, its rank and score, and the boost.
    assert!(explain["first_phase"]["value"].is_number(), "{body}");
    assert!(explain["first_phase_rank"].as_u64().is_some());
    let added = explain["boost"]["added"].as_f64().unwrap();
    let first = explain["first_phase_score"].as_f64().unwrap();
    let score = body["hits"][0]["score"].as_f64().unwrap();
    assert!((first + added - score).abs() < 1e-4, "{body}");

    // What hits carry: everything by default, less on request.
    let body = get(&format!("{b}/search?q=capacity&snippets=false"), None).body;
    let hit = body["hits"][0].as_object().unwrap();
    assert!(hit.contains_key("title") && hit.contains_key("url") && !hit.contains_key("snippet"));
    // (Collapsing by page, the default, adds how many versions each hit hides.)
    let keys = |params: &str| {
        let body = get(&format!("{b}/search?q=capacity&{params}"), None).body;
        let mut keys: Vec<String> = body["hits"][0]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        keys.sort_unstable();
        keys
    };
    assert_eq!(
        keys("fields=url&collapse=none"),
        ["id", "rank", "score", "url"]
    );
    assert_eq!(
        keys("fields=url"),
        ["collapsed", "id", "rank", "score", "url"]
    );

    // A fused first phase reports each input's agreement; collapsing and sorting answer.
    let Answer { status, body, .. } = get(&format!(
        "{b}/search?q=capacity+iterator&model=fusion&inputs=bm25,lm,bm25prox&fusion=rrf&explain=true"
    ), None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["model"], "fusion");
    assert_eq!(body["fusion"]["method"], "rrf");
    assert_eq!(
        body["fusion"]["inputs"].as_array().unwrap().len(),
        3,
        "{body}"
    );
    let inputs = body["hits"][0]["explain"]["fusion_inputs"]
        .as_array()
        .unwrap();
    assert_eq!(inputs[0]["model"], "bm25", "{body}");
    let Answer { status, body, .. } = get(
        &format!("{b}/search?q=capacity&collapse=page,near_duplicate"),
        None,
    );
    assert_eq!(status, 200, "{body}");
    assert!(body["hits"][0]["collapsed"].is_u64(), "{body}");

    let Answer { status, body, .. } = get(&format!("{b}/doc/vec?ignored=1"), None);
    assert_eq!(status, 200);
    assert_eq!(body["title"], "Vec");
    assert!(body["link_scores"]["pagerank"].as_f64().unwrap() > 0.0);
    let Answer { status, body, .. } = get(&format!("{b}/doc/std/slash/page.html"), None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["id"], "std/slash/page.html");

    let Answer { status, body, .. } = get(&format!("{b}/similar?doc=vec&k=2"), None);
    assert_eq!(status, 200, "{body}");
    for hit in body["hits"].as_array().unwrap() {
        let bound = hit["error_bound"].as_f64().unwrap();
        assert!(bound > 0.0 && bound < 0.2, "{body}");
    }

    let huge = "word+".repeat(4000);
    let cases: Vec<(String, &str)> = vec![
        ("search?q=".into(), "q"),
        ("search?q=+++%09".into(), "q"),
        (format!("search?q={huge}"), "q"),
        ("search?q=a&k=0".into(), "k"),
        ("search?q=a&k=100000".into(), "k"),
        ("search?q=a&k=ten".into(), "k"),
        ("search?q=a&model=bm99".into(), "model"),
        ("search?q=%FF%FE".into(), "q"),
        ("search?q=a&colour=red".into(), "colour"),
        ("search?q=a&q=b".into(), "q"),
        ("search?k=3".into(), "q"),
        ("search?q=a&field=nope".into(), "field"),
        ("search?q=a&boost=pagerank&k=200".into(), "offset"),
        ("similar?doc=vec&k=0".into(), "k"),
        ("similar?doc=vec&k=2&colour=red".into(), "colour"),
        (
            "search?q=a&boost=pagerank&boost_weight=NaN".into(),
            "boost_weight",
        ),
        (
            "search?q=a&boost=pagerank&boost_weight=inf".into(),
            "boost_weight",
        ),
        (
            "search?q=a&boost=pagerank&boost_weight=1e308".into(),
            "boost_weight",
        ),
        ("search?q=a&boost_weight=2".into(), "boost_weight"),
        ("search?q=a&fields=body".into(), "fields"),
        ("search?q=a&window=0&boost=pagerank".into(), "window"),
        (
            "search?q=a&model=fusion&inputs=bm25,lm&fusion=rfr".into(),
            "fusion",
        ),
        ("search?q=a&model=fusion&inputs=bm25,lm".into(), "fusion"),
        (
            "search?q=a&model=fusion&inputs=bm25,bm99&fusion=rrf".into(),
            "inputs",
        ),
        (
            "search?q=a&model=fusion&inputs=bm25,bm25&fusion=rrf".into(),
            "inputs",
        ),
        (
            "search?q=a&model=fusion&inputs=bm25&fusion=rrf".into(),
            "inputs",
        ),
        ("search?q=a&model=fusion&fusion=rrf".into(), "inputs"),
        (
            "search?q=a&model=fusion&inputs=bm25,lm&fusion=combsum&fusion_weights=1,-2".into(),
            "fusion_weights",
        ),
        (
            "search?q=a&model=fusion&inputs=bm25,lm&fusion=combsum&fusion_weights=1,inf".into(),
            "fusion_weights",
        ),
        (
            "search?q=a&model=fusion&inputs=bm25,lm&fusion=combsum&fusion_weights=1,1e308".into(),
            "fusion_weights",
        ),
        (
            "search?q=a&model=fusion&inputs=bm25,lm&fusion=rrf&fusion_weights=1".into(),
            "fusion_weights",
        ),
        (
            "search?q=a&model=fusion&inputs=bm25,lm&fusion=rrf&fusion_norm=zscore".into(),
            "fusion_norm",
        ),
        (
            "search?q=a&model=fusion&inputs=bm25,lm&fusion=rrf&fusion_depth=0".into(),
            "fusion_depth",
        ),
        ("search?q=a&inputs=bm25,lm".into(), "inputs"),
        ("search?q=a&collapse=author".into(), "collapse"),
        ("search?q=a&collapse=page&k=20&window=10".into(), "offset"),
        ("search?q=a&sort=popular".into(), "sort"),
        // No document has `published_at`: a sort by it is refused, not silently unordered.
        ("search?q=capacity&sort=fresh".into(), "sort"),
        ("search?q=a&sort=hot&rerank=true".into(), "sort"),
        // A window with no reranker, boost or collapsing (collapsing by page is the default).
        ("search?q=a&window=50&collapse=none".into(), "window"),
        ("livez?verbose=1".into(), "verbose"),
        ("openapi.json?x=1".into(), "x"),
    ];
    for (path, field) in cases {
        let Answer { status, body, .. } = get(&format!("{b}/{path}"), None);
        assert_eq!(status, 400, "{path}: {body}");
        assert_eq!(body["error"]["code"], "bad_request", "{path}");
        assert_eq!(body["error"]["field"], field, "{path}: {body}");
    }
    let status = get(&format!("{b}/doc/nope"), None).status;
    assert_eq!(status, 404);
    let status = get(&format!("{b}/no/such/route"), None).status;
    assert_eq!(status, 404);

    // Still serving after all of that.
    let Answer { status, body, .. } = get(&format!("{b}/search?q=iterator"), None);
    assert_eq!(status, 200);
    assert_eq!(body["hits"][0]["id"], "iter");
    assert_eq!(get(&format!("{b}/livez"), None).status, 200);
    let Answer {
        status, body: page, ..
    } = get(&format!("{b}/?q=capacity"), None);
    assert_eq!(status, 200, "the search page takes a shareable ?q=");
    assert!(page.as_str().unwrap().contains("/static/search.js"));
    let Answer {
        status,
        body: script,
        ..
    } = get(&format!("{b}/static/search.js"), None);
    assert_eq!(status, 200);
    assert!(script.as_str().unwrap().contains("fetch(\"/search?"));
    assert!(script.as_str().unwrap().contains("similar result"));
    assert_eq!(get(&format!("{b}/readyz"), None).status, 200);
}

#[cfg(unix)]
#[test]
fn sigterm_shuts_down_gracefully() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(&corpus(dir.path()));
    assert_eq!(get(&format!("{}/livez", server.base), None).status, 200);
    let pid = server.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let status = server.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}
