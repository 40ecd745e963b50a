//! `/metrics` and `/openapi.json` of a real server: requests are counted under their route
//! template, the index gauges match the data directory, every metric the Grafana dashboard
//! queries is exported, and the OpenAPI document lists the public and admin routes.

use std::collections::BTreeSet;

use crate::util::*;

/// Metric names present in a Prometheus text exposition.
fn exported_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect()
}

/// The value of the sample line that starts with `prefix`.
fn sample(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// Metric names in PromQL expressions: identifiers that are neither functions, keywords nor
/// label names.
fn queried_names(expr: &str) -> BTreeSet<String> {
    const NOT_METRICS: &[&str] = &[
        "histogram_quantile",
        "rate",
        "increase",
        "sum",
        "by",
        "avg",
        "max",
        "min",
        "count",
        "le",
        "route",
        "status",
        "phase",
        "kind",
        "model",
        "version",
        "metric",
        "method",
    ];
    let mut names = BTreeSet::new();
    let mut word = String::new();
    let mut in_braces = false;
    for c in expr.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
            continue;
        }
        let is_name = !word.is_empty()
            && !in_braces
            && !word.starts_with(|c: char| c.is_ascii_digit())
            && !NOT_METRICS.contains(&word.as_str());
        if is_name {
            names.insert(word.clone());
        }
        word.clear();
        match c {
            '{' => in_braces = true,
            '}' => in_braces = false,
            _ => {}
        }
    }
    names
}

#[test]
fn metrics_cover_requests_index_and_the_dashboard() {
    let dir = tempfile::tempdir().unwrap();
    let data = ingest(dir.path(), DOCS);
    let db = fresh_database(dir.path());
    let server = start(&data, &db, Some(TOKEN));
    let b = &server.base;
    assert_eq!(get(&format!("{b}/search?q=capacity"), None).status, 200);
    assert_eq!(get(&format!("{b}/doc/nope"), None).status, 404);
    assert_eq!(get(&format!("{b}/doc/vec"), None).status, 200);
    assert_eq!(get(&format!("{b}/no/such/page"), None).status, 404);
    assert_eq!(get(&format!("{b}/admin/jobs"), None).status, 401);

    let m = get(&format!("{b}/metrics"), None);
    assert_eq!(m.status, 200);
    let text = m.body.as_str().unwrap().to_string();
    let names = exported_names(&text);

    assert_eq!(
        sample(
            &text,
            r#"rankd_http_requests_total{method="GET",route="/doc/{*id}",status="404"}"#
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"rankd_http_requests_total{method="GET",route="/doc/{*id}",status="200"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"rankd_http_requests_total{method="GET",route="unmatched",status="404"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"rankd_http_requests_total{method="GET",route="/admin/jobs",status="401"}"#
        ),
        Some(1.0)
    );
    assert!(!text.contains("/doc/nope") && !text.contains("/no/such/page"));
    assert_eq!(
        sample(
            &text,
            r#"rankd_http_request_duration_seconds_count{method="GET",route="/search"}"#
        ),
        Some(1.0)
    );
    assert!(sample(&text, r#"rankd_errors_total{kind="unauthorized"}"#).unwrap() >= 1.0);
    assert!(sample(&text, r#"rankd_errors_total{kind="not_found"}"#).unwrap() >= 2.0);
    for phase in ["retrieve", "features", "rerank", "collapse"] {
        assert!(
            text.contains(&format!(
                "rankd_search_phase_duration_seconds_bucket{{phase=\"{phase}\",le=\"0.0001\"}}"
            )),
            "sub-millisecond bucket of {phase}"
        );
    }
    assert_eq!(
        sample(
            &text,
            r#"rankd_search_phase_duration_seconds_count{phase="retrieve"}"#
        ),
        Some(1.0),
        "one search, one first-phase retrieval"
    );
    assert_eq!(sample(&text, "rankd_index_documents"), Some(3.0));
    let bytes: u64 = walk(&data.join("index"));
    assert_eq!(sample(&text, "rankd_index_size_bytes"), Some(bytes as f64));
    assert_eq!(
        sample(&text, r#"rankd_active_model_info{model="none"}"#),
        Some(1.0)
    );

    // Every metric the dashboard queries exists, under the exact name that is exported.
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string("deploy/grafana/dashboards/rankd.json").unwrap(),
    )
    .unwrap();
    let mut queried = BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            queried.extend(queried_names(target["expr"].as_str().unwrap()));
        }
    }
    assert!(queried.len() >= 10, "{queried:?}");
    let missing: Vec<&String> = queried.iter().filter(|n| !names.contains(*n)).collect();
    assert!(
        missing.is_empty(),
        "dashboard queries unexported metrics {missing:?}"
    );
}

fn walk(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                walk(&e.path())
            } else {
                m.len()
            }
        })
        .sum()
}

#[test]
fn promql_names_are_found() {
    let names = queried_names(
        "histogram_quantile(0.99, sum by (le, route) (rate(rankd_x_bucket{route=\"/a_b\"}[5m]))) / up",
    );
    assert_eq!(
        names,
        ["rankd_x_bucket", "up"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
}

#[test]
fn openapi_lists_public_and_admin_routes() {
    let dir = tempfile::tempdir().unwrap();
    let data = ingest(dir.path(), DOCS);
    let db = fresh_database(dir.path());
    let server = start(&data, &db, None);
    let doc = get(&format!("{}/openapi.json", server.base), None);
    assert_eq!(doc.status, 200);
    assert!(doc.body["openapi"].as_str().unwrap().starts_with("3."));
    let paths = doc.body["paths"].as_object().unwrap();
    for p in [
        "/search",
        "/doc/{id}",
        "/similar",
        "/livez",
        "/readyz",
        "/metrics",
        "/openapi.json",
        "/admin/documents",
        "/admin/documents/delete",
        "/admin/judgments",
        "/admin/judgments/qrels",
        "/admin/queries",
        "/admin/jobs",
        "/admin/jobs/{id}",
        "/admin/jobs/{id}/cancel",
        "/admin/graph",
        "/admin/seeds",
        "/admin/seeds/{doc_id}",
        "/admin/evaluate",
        "/admin/label-batch",
        "/admin/label-batch/{id}",
        "/admin/reservations",
    ] {
        assert!(paths.contains_key(p), "{p} missing from {:?}", paths.keys());
    }
    assert!(paths["/admin/jobs"]["get"]["security"].is_array());
    assert!(paths["/search"]["get"].get("security").is_none());
    // Responses with a documented schema, down to the listed items' fields.
    let schemas = &doc.body["components"]["schemas"];
    for (path, schema, list, item_fields) in [
        (
            "/search",
            "SearchResponse",
            "hits",
            &["rank", "id", "score"][..],
        ),
        ("/similar", "SimilarResponse", "hits", &["id"][..]),
        ("/doc/{id}", "DocResponse", "", &[][..]),
        (
            "/admin/jobs",
            "JobList",
            "jobs",
            &["id", "kind", "status", "seconds"][..],
        ),
        (
            "/admin/judgments",
            "JudgmentList",
            "judgments",
            &["query_id", "doc_id", "grade"][..],
        ),
        (
            "/admin/reservations",
            "ReservationList",
            "reservations",
            &["batch_id", "pos"][..],
        ),
        (
            "/admin/seeds",
            "SeedList",
            "seeds",
            &["doc_id", "added_at"][..],
        ),
    ] {
        let reference = &paths[path]["get"]["responses"]["200"]["content"]["application/json"]
            ["schema"]["$ref"];
        assert_eq!(
            reference.as_str(),
            Some(format!("#/components/schemas/{schema}").as_str()),
            "{path}"
        );
        if list.is_empty() {
            continue;
        }
        let items = &schemas[schema]["properties"][list]["items"]["$ref"];
        let item = items
            .as_str()
            .unwrap_or_else(|| panic!("{path}: {list} items"));
        let item = &schemas[item.trim_start_matches("#/components/schemas/")];
        for field in item_fields {
            assert!(
                item["properties"].get(*field).is_some(),
                "{path}: {field} missing from {item}"
            );
        }
    }
    assert_eq!(
        doc.body["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
}
