//! The model registry and training over HTTP against a real server, on SQLite or PostgreSQL
//! (`RANKD_TEST_DATABASE_URL`): training on stored judgments, activation (hot swap seen by
//! `/search`), rollback, deletion, every bad request leaving the database unchanged, and the
//! activation guard on every path that activates (the admin API, and the demo's library path).

use crate::util::*;

#[test]
fn train_activate_roll_back_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let (data, db, server) = topic_server(dir.path(), false);
    let b = &server.base;
    let t = Some(TOKEN);

    // Training without judgments: 400, nothing stored.
    let before = snapshot(&db);
    assert_error(
        &post_json(&format!("{b}/admin/train"), t, "{}"),
        400,
        None,
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
    let first = train_job(b, r#"{"model":"linear","epochs":15,"lr":0.01}"#);
    let second = train_job(
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
    assert_error(&act(&first), 409, None, "already active");
    assert_error(&act("nope"), 404, None, "no model");
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
    assert_error(&del(&first), 409, None, "active");
    assert_eq!(snapshot(&db), before);
    assert_eq!(del(&second).status, 204);
    assert_error(&del(&second), 404, None, "no model");
    // With the other deleted there is nothing to roll back to.
    assert_error(
        &post_json(&format!("{b}/admin/models/rollback"), t, ""),
        409,
        None,
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

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(gbdt_fixtures().join(name)).unwrap()
}

/// `POST /admin/models`: other libraries' trees and rankd model files upload inactive,
/// bound to the feature set by name (or position), activate and roll back like trained
/// models; every bad upload is a 400 that says what is wrong, registers nothing and leaves
/// the active model serving. `POST /admin/train` trains trees with `model: gbdt`.
#[test]
fn tree_models_upload_train_activate_and_refuse_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let (data, db, server) = topic_server(dir.path(), false);
    let b = &server.base;
    let t = Some(TOKEN);
    let upload = |query: &str, bytes: &[u8]| {
        call(
            "POST",
            &format!("{b}/admin/models{query}"),
            t,
            Some(("application/octet-stream", bytes)),
        )
    };

    // XGBoost JSON naming rankd features, detected; LightGBM text without names, by position.
    let xgb = String::from_utf8(fixture("xgb_rank_ndcg.json"))
        .unwrap()
        .replace("\"bm25\"", "\"bm25f\"")
        .replace("\"pagerank\"", "\"link.pagerank\"")
        .replace("\"url_depth\"", "\"url.depth\"")
        .replace("\"title_match\"", "\"title.bm25\"");
    let a = upload("", xgb.as_bytes());
    assert_eq!(a.status, 201, "{}", a.body);
    assert_eq!(a.body["kind"], "gbdt");
    let xgb_id = a.body["model"].as_str().unwrap().to_string();
    let features: Vec<&str> = a.body["features"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(features
        .iter()
        .all(|f| ["bm25f", "link.pagerank", "url.depth", "title.bm25"].contains(f)));
    let a = upload("?format=lightgbm", &fixture("lgb_none_unnamed.txt"));
    assert_eq!(a.status, 201, "{}", a.body);
    let lgb_id = a.body["model"].as_str().unwrap().to_string();
    let rankd_file = std::fs::read(a.body["file"].as_str().unwrap()).unwrap();
    // The same content again: a conflict.
    assert_error(&upload("", xgb.as_bytes()), 409, None, "already registered");

    let models = get(&format!("{b}/admin/models"), t).body;
    assert_eq!(models["active"], serde_json::Value::Null);
    assert_eq!(models["models"].as_array().unwrap().len(), 2);
    let act = |id: &str| post_json(&format!("{b}/admin/models/{id}/activate"), t, "");
    assert_eq!(act(&xgb_id).status, 200);
    let search = || get(&format!("{b}/search?q=vector+basics"), None).body;
    assert_eq!(search()["reranker"], xgb_id.as_str());

    // Bad uploads.
    let mut version: serde_json::Value = serde_json::from_slice(&rankd_file).unwrap();
    version["format_version"] = 99.into();
    // Trees in a model file are arrays per node field; node 0 of tree 0 is a split.
    let tree0 = |v: &mut serde_json::Value| v["gbdt"]["forest"]["trees"][0].clone();
    let mut outside: serde_json::Value = serde_json::from_slice(&rankd_file).unwrap();
    let mut tree = tree0(&mut outside);
    tree["feature"][0] = 40.into();
    outside["gbdt"]["forest"]["trees"][0] = tree;
    let mut cycle: serde_json::Value = serde_json::from_slice(&rankd_file).unwrap();
    let mut tree = tree0(&mut cycle);
    tree["left"][0] = 0.into();
    cycle["gbdt"]["forest"]["trees"][0] = tree;
    let mut letor: serde_json::Value = serde_json::from_slice(&rankd_file).unwrap();
    let n = letor["feature_names"].as_array().unwrap().len();
    letor["feature_names"] = (1..=n).map(|i| format!("f{i}")).collect();
    let lgb = String::from_utf8(fixture("lgb_none_unnamed.txt")).unwrap();
    let with_leaf = |v: &str| {
        lgb.replacen(
            "leaf_value=0.81236363165757863",
            &format!("leaf_value={v}"),
            1,
        )
    };
    let bad: Vec<(&str, Vec<u8>, &str)> = vec![
        ("", b"not a model".to_vec(), "not a rankd model file"),
        ("?format=xgboost", b"{\"learner\": 3".to_vec(), "JSON"),
        ("", Vec::new(), "empty"),
        ("?format=forest", xgb.as_bytes().to_vec(), "format"),
        (
            "?colour=red",
            xgb.as_bytes().to_vec(),
            "unknown parameter `colour`",
        ),
        ("", fixture("xgb_rank_ndcg.json"), "bm25"),
        ("", version.to_string().into_bytes(), "version"),
        ("", outside.to_string().into_bytes(), "feature"),
        ("", cycle.to_string().into_bytes(), "node"),
        ("", letor.to_string().into_bytes(), "f1"),
        ("?format=lightgbm", with_leaf("nan").into_bytes(), "leaf"),
        ("?format=lightgbm", with_leaf("inf").into_bytes(), "leaf"),
        ("", fixture("lgb_zero_as_missing.txt"), "bm25"),
    ];
    let before = snapshot(&db);
    let files = std::fs::read_dir(data.join("models")).unwrap().count();
    for (query, bytes, says) in &bad {
        let a = upload(query, bytes);
        assert_eq!(a.status, 400, "{query} {says}: {}", a.body);
        let message = a.body["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(says), "expected {says:?}: {}", a.body);
    }
    assert_eq!(snapshot(&db), before, "nothing registered");
    assert_eq!(
        std::fs::read_dir(data.join("models")).unwrap().count(),
        files
    );
    assert_eq!(
        search()["reranker"],
        xgb_id.as_str(),
        "the active model still serves"
    );

    // Activation and rollback as for every model.
    assert_eq!(act(&lgb_id).status, 200);
    assert_eq!(search()["reranker"], lgb_id.as_str());
    let rb = post_json(&format!("{b}/admin/models/rollback"), t, "");
    assert_eq!(rb.body["active"], xgb_id.as_str(), "{}", rb.body);
    assert_eq!(search()["reranker"], xgb_id.as_str());

    // Training trees on the stored judgments.
    let a = post_json(&format!("{b}/admin/judgments"), t, &topic_judgments());
    assert_eq!(a.status, 200, "{}", a.body);
    for (body, says) in [
        (
            r#"{"model":"gbdt","objective":"ranknet"}"#,
            "does not train trees",
        ),
        (r#"{"model":"gbdt","trees":0}"#, "trees must be"),
        (r#"{"model":"gbdt","leaves":"many"}"#, "leaves"),
    ] {
        assert_error(
            &post_json(&format!("{b}/admin/train"), t, body),
            400,
            None,
            says,
        );
    }
    let trained = train_job(
        b,
        r#"{"model":"gbdt","objective":"lambda-ndcg","trees":15,"leaves":4,"min_data_in_leaf":2}"#,
    );
    let models = get(&format!("{b}/admin/models"), t).body;
    let record = models["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == trained.as_str())
        .unwrap()
        .clone();
    assert_eq!(record["model"], "gbdt", "{record}");
    assert_eq!(record["log"].as_array().unwrap().len(), 15, "{record}");
    assert_eq!(act(&trained).status, 200);
    assert_eq!(search()["reranker"], trained.as_str());
}

/// The activation guard (`rankd::training::guard`): a model trained to put the wrong
/// documents first is refused by `POST /admin/train` with `activate` and by
/// `POST /admin/models/{id}/activate`, which name the class and the numbers; `force=true`
/// activates it anyway.
#[test]
fn the_activation_guard_refuses_a_model_worse_than_the_first_phase() {
    let dir = tempfile::tempdir().unwrap();
    let (_data, _db, server) = topic_server(dir.path(), false);
    let b = &server.base;
    let t = Some(TOKEN);

    let (rows, held) = guard_judgments();
    let a = post_json(
        &format!("{b}/admin/judgments"),
        t,
        &serde_json::Value::Array(rows).to_string(),
    );
    assert_eq!(a.status, 200, "{}", a.body);

    // POST /admin/train with activate: trained, registered, not activated.
    let a = post_json(
        &format!("{b}/admin/train"),
        t,
        r#"{"model":"linear","epochs":40,"lr":0.01,"activate":true}"#,
    );
    assert_eq!(a.status, 202, "{}", a.body);
    let job = wait_for_job(b, a.body["job"].as_i64().unwrap());
    assert_eq!(job["status"], "succeeded", "{job}");
    let result = &job["result"];
    let id = result["model"].as_str().unwrap().to_string();
    assert_eq!(result["activated"], false, "{result}");
    let refused = result["guard"]["refused"].as_str().unwrap();
    assert!(refused.contains("worse than the first phase"), "{refused}");
    assert!(refused.contains("judgments"), "{refused}");
    let class = &result["guard"]["classes"][0];
    assert_eq!(class["queries"], held);
    assert!(class["candidate"].as_f64().unwrap() < class["first_phase"].as_f64().unwrap());
    let search = || get(&format!("{b}/search?q=vector+basics"), None).body["reranker"].clone();
    assert_eq!(search(), serde_json::Value::Null);
    let models = get(&format!("{b}/admin/models"), t).body;
    assert_eq!(models["active"], serde_json::Value::Null);
    assert_eq!(models["models"][0]["guard"]["refused"], refused);

    // POST /admin/models/{id}/activate judges it on the queries its training held out.
    let act = |query: &str| post_json(&format!("{b}/admin/models/{id}/activate{query}"), t, "");
    let a = act("");
    assert_error(&a, 409, None, "worse than the first phase");
    assert!(a.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("force=true"));
    assert_eq!(a.body["guard"]["refused"], refused);
    assert_eq!(search(), serde_json::Value::Null);
    assert_error(&act("?force=maybe"), 400, Some("force"), "");
    // Forced: served, the comparison still reported.
    let a = act("?force=true");
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["active"], id.as_str());
    assert_eq!(a.body["guard"]["refused"], refused);
    assert_eq!(search(), id.as_str());
}

/// The demo's path through the guard (`rankd::judgments::docs`, what `rankd demo` trains
/// and activates with): a model trained to put the wrong documents first is stored but not
/// activated, and the reason names the class.
#[test]
fn the_demo_does_not_activate_a_model_worse_than_the_first_phase() {
    use rankd::judgments::docs;
    let dir = tempfile::tempdir().unwrap();
    let data = ingest_topics(dir.path(), false);
    let engine = rankd::search::Engine::new(rankd::text::TextIndex::open(&data, None).unwrap());
    let (train, held) = guard_queries();
    let judgments = docs::DocsJudgments {
        train,
        held_out: rankd::training::guard::Classes::from([("judgments".into(), held)]),
        derived: Default::default(),
        excluded: 0,
    };
    let mut settings = rankd::training::TrainSettings::on_index();
    settings.network.epochs = 40;
    settings.network.lr = 0.01;
    let trained = docs::train(&engine, &judgments, &settings, "test", &docs::Quiet).unwrap();
    assert!(trained.path.exists());
    let class = &trained.classes[0];
    assert!(class.reranked < class.first_phase, "{class:?}");
    let refused = trained.activate_if_allowed(&data).unwrap();
    let refused = refused.expect("the guard refuses it");
    assert!(refused.contains("worse than the first phase"), "{refused}");
    assert!(refused.contains("judgments"), "{refused}");
    assert_eq!(
        rankd::search::model::activation_request_id(&data).unwrap(),
        None,
        "nothing asks the server to serve it"
    );
}

/// Issue 30 (N1, N7, N8, N9): a tree model an upload could make too deep, too large or
/// non-finite is a 400 naming the limit, and a chain as deep as allowed is explained
/// (`explain=true`, TreeSHAP) without taking the server down: a 12 000-deep chain used to
/// upload, activate, and abort the process at the next explained search.
#[test]
fn hostile_tree_models_are_refused_and_deep_ones_explained() {
    let dir = tempfile::tempdir().unwrap();
    let (_data, _db, server) = topic_server(dir.path(), false);
    let b = &server.base;
    let t = Some(TOKEN);
    let upload = |bytes: &[u8]| {
        call(
            "POST",
            &format!("{b}/admin/models"),
            t,
            Some(("application/octet-stream", bytes)),
        )
    };
    // The LightGBM fixture, stored as a rankd model file: the template of the others.
    let base = call(
        "POST",
        &format!("{b}/admin/models?format=lightgbm"),
        t,
        Some(("application/octet-stream", &fixture("lgb_none_unnamed.txt"))),
    );
    assert_eq!(base.status, 201, "{}", base.body);
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(base.body["file"].as_str().unwrap()).unwrap())
            .unwrap();
    let d = file["feature_names"].as_array().unwrap().len() as i64;
    // A rankd model file whose forest is `trees`.
    let with_trees = |trees: Vec<serde_json::Value>| {
        let mut m = file.clone();
        m["gbdt"]["forest"]["trees"] = trees.into();
        m["id"] = "00000000000000d1".into(); // an upload keeps the file's id
        m.to_string().into_bytes()
    };
    // A chain `depth` splits deep (split k: x ≤ 0.5 goes to leaf k, else one deeper).
    let chain = |depth: i64| {
        let (mut feature, mut left, mut right, mut value, mut cover) =
            (vec![], vec![], vec![], vec![], vec![]);
        for k in 0..depth {
            let at = 2 * k;
            feature.extend([k % d, -1]);
            left.extend([at + 1, 0]);
            right.extend([at + 2, 0]);
            value.extend([0.0, 0.001 * k as f64]);
            cover.extend([(depth - k + 1) as f64, 1.0]);
        }
        feature.push(-1);
        left.push(0);
        right.push(0);
        value.push(1.0);
        cover.push(1.0);
        let n = feature.len();
        serde_json::json!({
            "feature": feature, "threshold": vec![0.5; n], "nan_left": vec![false; n],
            "left": left, "right": right, "value": value, "cover": cover,
        })
    };
    let leaf = |v: f64| {
        serde_json::json!({"feature": [-1], "threshold": [0.0], "nan_left": [false],
            "left": [0], "right": [0], "value": [v]})
    };
    let mut infinite = chain(1);
    infinite["threshold"][0] = serde_json::json!(1e39); // beyond f32: read as +∞
    for (bytes, says) in [
        (
            with_trees(vec![chain(12_000)]),
            "12000 splits deep; at most 2048",
        ),
        (
            with_trees(vec![leaf(0.0); 20_001]),
            "20001 trees; at most 20000",
        ),
        (
            with_trees(vec![leaf(3e38), leaf(3e38)]),
            "scores could reach",
        ),
        (with_trees(vec![infinite]), "threshold"),
    ] {
        assert_error(&upload(&bytes), 400, None, says);
    }

    let deep = upload(&with_trees(vec![chain(2_048), chain(2_048)]));
    assert_eq!(deep.status, 201, "{}", deep.body);
    let id = deep.body["model"].as_str().unwrap();
    let act = post_json(&format!("{b}/admin/models/{id}/activate"), t, "");
    assert_eq!(act.status, 200, "{}", act.body);
    for _ in 0..3 {
        let s = get(&format!("{b}/search?q=vector+basics&explain=true"), None);
        assert_eq!(s.status, 200, "{}", s.body);
        assert_eq!(s.body["reranker"], id);
    }
    assert_eq!(get(&format!("{b}/livez"), None).status, 200);
}

/// `POST /admin/train {"source": "clicks"}` trains on the server's own log: the first pages
/// `/search` logged and the clicks posted to `/events`, the guard holding out click queries;
/// `source` takes both sources as an array; click options without clicks, an unknown source
/// and a log without clicks are 400s naming the field.
#[test]
fn train_on_the_servers_click_log() {
    let dir = tempfile::tempdir().unwrap();
    let (_data, _db, server) = topic_server(dir.path(), false);
    let b = &server.base;
    let t = Some(TOKEN);
    for (body, field, says) in [
        (
            r#"{"source":"clicks"}"#,
            "source",
            "logged first pages with clicks",
        ),
        (
            r#"{"debias":"none"}"#,
            "debias",
            "applies to training on clicks",
        ),
        (r#"{"source":"bogus"}"#, "source", "source must be"),
        (r#"{"source":[]}"#, "source", "nothing to learn from"),
        (r#"{"source":"clicks","debias":"maybe"}"#, "debias", "ips"),
        (
            r#"{"source":"clicks","debias":"pairwise","model":"linear"}"#,
            "debias",
            "trains trees, not model linear",
        ),
        (
            r#"{"source":"clicks","propensity_clip":0}"#,
            "propensity_clip",
            "(0, 1]",
        ),
        (
            r#"{"source":"clicks","click_labels":"linear"}"#,
            "click_labels",
            "graded",
        ),
        (
            r#"{"source":"clicks","objective":"lambda-ndcg","model":"gbdt"}"#,
            "click_labels",
            "not lambda-ndcg",
        ),
        (
            r#"{"source":"clicks","noise_floor":"estimate"}"#,
            "noise_floor",
            "click_labels \"binary\"",
        ),
    ] {
        assert_error(
            &post_json(&format!("{b}/admin/train"), t, body),
            400,
            Some(field),
            says,
        );
    }
    // Users search each topic in twenty wordings and click the hits whose title names it.
    let topics = ["vector", "iterator", "thread", "socket", "parser", "matrix"];
    let wordings = [
        "basics",
        "notes",
        "guide",
        "tutorial",
        "intro",
        "reference",
        "examples",
        "howto",
        "faq",
        "tips",
        "overview",
        "primer",
        "manual",
        "cookbook",
        "recipes",
        "patterns",
        "errors",
        "tricks",
        "usage",
        "design",
    ];
    let mut clicks = Vec::new();
    for wording in wordings {
        for (q, topic) in topics.iter().enumerate() {
            let text = format!("{topic} {wording}");
            let answer = search_body(b, "k=10", &text);
            let query_id = answer["query_id"].as_str().unwrap().to_string();
            for (k, hit) in answer["hits"].as_array().unwrap().iter().enumerate() {
                let id = hit["id"].as_str().unwrap();
                let i: usize = id[1..].parse().unwrap();
                if topic_relevant(q, i) && k < 6 {
                    clicks.push(serde_json::json!({"action_name": "click",
                        "query_id": query_id, "object_id": id, "position": k + 1,
                        "timestamp": 1_795_845_600_000i64}));
                }
            }
        }
    }
    let clicked: std::collections::HashSet<String> =
        clicks.iter().map(|c| c["query_id"].to_string()).collect();
    let body = serde_json::Value::Array(clicks).to_string();
    // The impressions are written in batches: wait until their query ids are known.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let a = post_json(&format!("{b}/events"), None, &body);
        if a.status == 200 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", a.body);
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let a = post_json(
        &format!("{b}/admin/train"),
        t,
        r#"{"source":"clicks","model":"linear","epochs":10}"#,
    );
    assert_eq!(a.status, 202, "{}", a.body);
    let job = wait_for_job(b, a.body["job"].as_i64().unwrap());
    assert_eq!(job["status"], "succeeded", "{job}");
    let data = &job["result"]["data"];
    assert_eq!(data["clicks"]["click_labels"], "graded", "{data}");
    // A fifth of the clicked queries is the guard's; the rest, and the pages without a
    // click, train.
    let held = clicked.len() / 5;
    assert!(held >= 10, "{} clicked queries", clicked.len());
    assert_eq!(data["held_out"], held, "{data}");
    let pages = topics.len() * wordings.len();
    assert_eq!(data["clicks"]["pages"], pages - held, "{data}");
    assert_eq!(data["clicks"]["queries"], pages - held, "{data}");
    assert!(data["judged"].is_null(), "{data}");
    let guard = &job["result"]["guard"]["classes"][0];
    assert_eq!(
        (&guard["class"], &guard["queries"]),
        (&"clicks".into(), &held.into()),
        "{job}"
    );
    // Every page showed the same ranking: the job says the propensities are not identified.
    assert_eq!(data["clicks"]["pairs_at_several_ranks"], 0, "{data}");
    let logs = job["logs"].to_string();
    assert!(
        logs.contains("cannot be told from the documents' attraction"),
        "{logs}"
    );
    // The activation judges the model on the same held-out click queries.
    let id = job["result"]["model"].as_str().unwrap();
    let a = call(
        "POST",
        &format!("{b}/admin/models/{id}/activate?force=true"),
        t,
        None,
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        a.body["guard"]["classes"][0]["class"], "clicks",
        "{}",
        a.body
    );
    assert_eq!(a.body["guard"]["classes"][0]["queries"], held, "{}", a.body);

    // The noise floor estimated from the server's own sessions and subtracted.
    let a = post_json(
        &format!("{b}/admin/train"),
        t,
        r#"{"source":"clicks","model":"linear","epochs":5,"noise_floor":"estimate","click_labels":"binary"}"#,
    );
    assert_eq!(a.status, 202, "{}", a.body);
    let job = wait_for_job(b, a.body["job"].as_i64().unwrap());
    assert_eq!(job["status"], "succeeded", "{job}");
    let clicks = &job["result"]["data"]["clicks"];
    let floor = clicks["noise_floor"].as_f64().unwrap_or(-1.0);
    assert!((0.0..1.0).contains(&floor), "{clicks}");
    assert!(clicks["below_floor"].is_u64(), "{clicks}");

    // Both sources: the stored judgments train beside the clicks.
    let a = post_json(&format!("{b}/admin/judgments"), t, &topic_judgments());
    assert_eq!(a.status, 200, "{}", a.body);
    let a = post_json(
        &format!("{b}/admin/train"),
        t,
        r#"{"source":["judgments","clicks"],"debias":"none","model":"linear","epochs":5}"#,
    );
    assert_eq!(a.status, 202, "{}", a.body);
    let job = wait_for_job(b, a.body["job"].as_i64().unwrap());
    assert_eq!(job["status"], "succeeded", "{job}");
    let data = &job["result"]["data"];
    let judged = data["judged"]["queries"].as_u64().unwrap();
    assert!((1..=12).contains(&judged), "{data}");
    assert_eq!(data["clicks"]["debias"], "none", "{data}");
    assert_eq!(
        data["clicks"]["propensities"],
        serde_json::json!([]),
        "{data}"
    );

    // Unbiased LambdaMART: the click groups' logged pages reach the tree trainer, which
    // reports the position biases it learned beside the judged queries' lambda-ndcg groups.
    let a = post_json(
        &format!("{b}/admin/train"),
        t,
        r#"{"source":["judgments","clicks"],"debias":"pairwise","model":"gbdt"}"#,
    );
    assert_eq!(a.status, 202, "{}", a.body);
    let job = wait_for_job(b, a.body["job"].as_i64().unwrap());
    assert_eq!(job["status"], "succeeded", "{job}");
    let result = &job["result"];
    assert_eq!(result["data"]["clicks"]["debias"], "pairwise", "{result}");
    let t_plus = crate::util::numbers(&result["position_bias"]["t_plus"]);
    assert_eq!(t_plus.first(), Some(&1.0), "{result}");
    assert!(
        t_plus.iter().all(|t| t.is_finite() && *t >= 0.0),
        "{result}"
    );
}
