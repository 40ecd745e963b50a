//! A collection over three leaf processes and a root answers on loopback exactly as the
//! single index does (issue 13): the Cranfield collection ingested with `--shards 3`, every
//! first-phase model and every query, top 100 ids and scores; the default reranked search
//! with titles, URLs and snippets; each document on the shard its id routes to.

use std::path::Path;

use crate::util::*;
use serde_json::Value;

const TOKEN: &str = "cluster-test-token";

fn queries() -> Vec<String> {
    rankd::corpus::cranfield::read_queries(&cranfield_dir().join("cran.qry"))
        .unwrap()
        .into_iter()
        .map(|q| q.text)
        .collect()
}

/// Uploads the model file `model` (id `id`) to the single node `one` and activates it.
fn activate(one: &Server, model: &Path, id: &str) {
    activate_model(&one.base, TOKEN, model, id);
}

/// A root over `leaves` (one per shard) reranking with the model file `model`.
fn start_root(leaves: &[Server], model: &Path) -> Server {
    start_root_with(leaves, model, &[])
}

/// As [`start_root`], with more flags.
fn start_root_with(leaves: &[Server], model: &Path, more: &[&str]) -> Server {
    let mut args = vec!["--role", "root", "--model", model.to_str().unwrap()];
    args.extend(more);
    for leaf in leaves {
        args.extend(["--shard", leaf.base.as_str()]);
    }
    start_serve(&args, None, &[])
}

/// How many `call`s the root `root` made to its leaves (all shards).
fn calls(root: &Server, call: &str) -> f64 {
    let call = format!("call=\"{call}\"");
    metric(
        &root.base,
        "rankd_cluster_leaf_call_duration_seconds_count",
        &[&call],
    )
    .unwrap_or(0.0)
}

fn search(base: &str, params: &str, q: &str) -> Value {
    let url = format!(
        "{base}/search?{params}&q={}",
        percent_encoding::utf8_percent_encode(q, percent_encoding::NON_ALPHANUMERIC)
    );
    let a = get(&url, None);
    assert_eq!(a.status, 200, "{url}: {}", a.body);
    a.body
}

#[test]
fn a_root_over_three_leaves_answers_as_the_single_index() {
    let dir = tempfile::tempdir().unwrap();
    let single = dir.path().join("single");
    let sharded = dir.path().join("sharded");
    let input = cranfield_dir();
    ingest_into("cranfield", &input, &single, None);
    ingest_into("cranfield", &input, &sharded, Some(3));
    // A reranker trained on the single index, active there and loaded by the root.
    let model = dir.path().join("m.json");
    let id = train_model(
        &single,
        &input.join("cran.qry"),
        &input.join("cranqrel"),
        3,
        &["--format", "cranfield"],
        &model,
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    let db = fresh_database(dir.path());
    let one = start(&single, &db, Some(TOKEN));
    activate(&one, &model, &id);

    let leaves = start_leaves(&sharded);
    let root = start_root(&leaves, &model);

    // Every document is on the shard its id routes to, and only there.
    let mut total = 0;
    for (s, leaf) in leaves.iter().enumerate() {
        let info = get(&format!("{}/cluster/v1/info", leaf.base), Some(CLUSTER_KEY));
        assert_eq!(info.status, 200, "{}", info.body);
        total += info.body["num_docs"].as_u64().unwrap();
        for doc in ["1", "2", "3", "700", "1400"] {
            let want = rankd::cluster::routing::shard_of(doc, 3) as usize == s;
            let status = get(&format!("{}/doc/{doc}", leaf.base), None).status;
            assert_eq!(
                status,
                if want { 200 } else { 404 },
                "doc {doc} on shard {s}"
            );
        }
    }
    assert_eq!(total, 1400);

    let queries = queries();
    // Statistics gathered per search, and summed from the shards' tables.
    let table_root = start_root_with(&leaves, &model, &["--stats", "table"]);
    // First phase, every model, every query: ids, scores and counts.
    let mut compared = 0;
    for model in ["bm25f", "bm25", "tfidf", "f2exp", "lm", "bm25prox"] {
        let params = format!("model={model}&k=100&rerank=false&fields=");
        for q in &queries {
            let a = search(&one.base, &params, q);
            for root in [&root, &table_root] {
                let b = search(&root.base, &params, q);
                assert_eq!(a["hits"], b["hits"], "{model} {q:?}");
                assert_eq!(a["total_hits"], b["total_hits"], "{model} {q:?}");
            }
            compared += a["hits"].as_array().unwrap().len();
        }
    }
    assert!(compared > 120_000, "only {compared} hits compared");
    // The table root took its statistics from the tables, once it had them.
    let (tables, rounds) = (calls(&table_root, "table"), calls(&table_root, "stats"));
    assert_eq!(tables, 3.0);
    assert!(rounds < 300.0, "{rounds} statistics calls in 1350 searches");
    // The default search: reranked by the same model, with titles, URLs and snippets.
    let mut snippets_with_terms = 0;
    for q in &queries {
        let (a, b) = (search(&one.base, "k=10", q), search(&root.base, "k=10", q));
        assert_eq!(a["reranker"], Value::String(id.clone()));
        assert_eq!(a["reranker"], b["reranker"], "{q:?}");
        assert_eq!(a["hits"], b["hits"], "{q:?}");
        assert_eq!(
            a["hits"],
            search(&table_root.base, "k=10", q)["hits"],
            "{q:?}"
        );
        let hits = a["hits"].as_array().unwrap();
        assert!(hits.iter().all(|h| h["title"].is_string()), "{a}");
        snippets_with_terms += hits
            .iter()
            .filter(|h| h["snippet"].as_str().is_some_and(|s| s.contains("<b>")))
            .count();
    }
    assert!(
        snippets_with_terms > 1000,
        "{snippets_with_terms} snippets show a query term"
    );
    // A page deep in the reranked window.
    for q in queries.iter().take(20) {
        let p = "k=7&offset=40&window=60";
        assert_eq!(
            search(&one.base, p, q)["hits"],
            search(&root.base, p, q)["hits"]
        );
    }
    // A fusion answers as on the single node.
    let p = "model=fusion&inputs=bm25,lm&fusion=rrf";
    let (a, b) = (search(&one.base, p, "flow"), search(&root.base, p, "flow"));
    assert_eq!((&a["hits"], &a["fusion"]), (&b["hits"], &b["fusion"]));
    // A sort answers as on the single node: here refused alike, no document having a date.
    let (a, b) = (
        get(&format!("{}/search?q=flow&sort=fresh", one.base), None),
        get(&format!("{}/search?q=flow&sort=fresh", root.base), None),
    );
    assert_eq!((a.status, &a.body["error"]), (b.status, &b.body["error"]));
    assert_eq!(a.status, 400, "{}", a.body);

    // The collection changes under the running leaves: a table root runs the search after
    // the change on the generation it pinned, learns of the new one from the replies and
    // fetches the new tables; from then on it answers as the single index, new document in.
    let more = dir.path().join("more.jsonl");
    std::fs::write(
        &more,
        r#"{"id":"late-1","url":"https://x.org/late","title":"Late shock","body":"shock wave boundary layer interaction zyzzyva"}"#,
    )
    .unwrap();
    ingest_into("jsonl", &more, &single, None);
    ingest_into("jsonl", &more, &sharded, Some(3));
    let params = "model=bm25&k=20&rerank=false&fields=";
    let start = std::time::Instant::now();
    let mut searches = 0;
    loop {
        let a = search(&one.base, params, "shock wave zyzzyva");
        let b = search(&table_root.base, params, "shock wave zyzzyva");
        searches += 1;
        if a["hits"][0]["id"] == "late-1" && a["hits"] == b["hits"] {
            break;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "the table root did not catch up: {b}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    eprintln!("table root caught up after {searches} searches");
}

/// A linked collection: link scores computed by `rankd graph` over the sharded directory
/// equal the single index's, so the PageRank boost and a reranker reading link and window
/// features rank through the root exactly as on the single node.
/// 300 generated documents over 16 words, each linking to 1–6 others (some to pages that are
/// no document), and the words.
fn linked_docs() -> ([&'static str; 16], Vec<String>) {
    let words: [&'static str; 16] = [
        "shock",
        "wave",
        "boundary",
        "layer",
        "flow",
        "heat",
        "transfer",
        "pressure",
        "wing",
        "supersonic",
        "laminar",
        "turbulent",
        "nozzle",
        "jet",
        "mach",
        "drag",
    ];
    let n = 300;
    let mut lines = Vec::new();
    let mut state = 7u64;
    let mut next = |m: usize| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        ((state >> 33) as usize) % m
    };
    for i in 0..n {
        let title: Vec<&str> = (0..3).map(|_| words[next(words.len())]).collect();
        let body: Vec<&str> = (0..20 + i % 31).map(|_| words[next(words.len())]).collect();
        let links: Vec<String> = (0..1 + i % 6)
            .map(|_| format!("https://x.org/p{}", next(n + 10)))
            .collect();
        lines.push(
            serde_json::json!({
                "id": format!("p{i}"), "url": format!("https://x.org/p{i}"),
                "title": title.join(" "), "body": body.join(" "), "links": links,
            })
            .to_string(),
        );
    }
    (words, lines)
}

#[test]
fn links_boost_and_link_features_through_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let (words, lines) = linked_docs();
    let input = dir.path().join("docs.jsonl");
    std::fs::write(&input, lines.join("\n")).unwrap();
    let single = dir.path().join("single");
    let sharded = dir.path().join("sharded");
    for (data, shards) in [(&single, None), (&sharded, Some(3))] {
        ingest_into("jsonl", &input, data, shards);
        rankd_ok(["graph", "--json", "--data-dir", data.to_str().unwrap()]);
    }
    // Each shard stores its own documents' part of the link scores, not the whole graph's.
    let mut held = 0;
    for shard in rankd::cluster::shard_dirs(&sharded, 3).unwrap() {
        let index = rankd::text::TextIndex::open(&shard, None).unwrap();
        let part = rankd::links::load(&index).unwrap().unwrap();
        assert_eq!(part.scores.n() as u64, index.num_docs());
        assert_eq!(part.scores.total_nodes(), lines.len());
        held += part.scores.n();
    }
    assert_eq!(held, lines.len());
    // Judgments: a document is relevant to "WORD" when its title holds the word.
    let queries: Vec<&str> = words.to_vec();
    let (mut qfile, mut qrels) = (String::new(), String::new());
    for (q, word) in queries.iter().enumerate() {
        qfile.push_str(&format!("q{q} {word}\n"));
        for (i, line) in lines.iter().enumerate() {
            let doc: Value = serde_json::from_str(line).unwrap();
            let grade = i32::from(doc["title"].as_str().unwrap().contains(word));
            qrels.push_str(&format!("q{q} 0 p{i} {grade}\n"));
        }
    }
    let (qpath, rpath, model) = (
        dir.path().join("q.txt"),
        dir.path().join("qrels.txt"),
        dir.path().join("m.json"),
    );
    std::fs::write(&qpath, qfile).unwrap();
    std::fs::write(&rpath, qrels).unwrap();
    let trained = train_model(&single, &qpath, &rpath, 3, &[], &model);
    let id = trained["id"].as_str().unwrap().to_string();
    assert!(
        trained.to_string().contains("window.hits_authority"),
        "the model reads the window's link features"
    );
    let db = fresh_database(dir.path());
    let one = start(&single, &db, Some(TOKEN));
    activate(&one, &model, &id);
    let leaves: Vec<Server> = (0..3)
        .map(|s| {
            let data = sharded.join(format!("shards/{s}"));
            let args = ["--role", "leaf", "--data-dir", data.to_str().unwrap()];
            start_serve(&args, Some(TOKEN), &[])
        })
        .collect();
    let root = start_root(&leaves, &model);
    // A graph job on a leaf would replace its part of the collection's graph with its own
    // shard's graph: refused, saying what to run.
    let refused = post_json(&format!("{}/admin/graph", leaves[0].base), Some(TOKEN), "");
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert!(
        refused.body.to_string().contains("rankd graph --data-dir"),
        "{}",
        refused.body
    );
    let compare = |root: &Server, params: &[&str]| {
        let mut compared = 0;
        for q in [
            "shock wave",
            "boundary layer",
            "heat transfer flow",
            "mach",
            "jet nozzle drag",
        ] {
            for p in params {
                let (a, b) = (search(&one.base, p, q), search(&root.base, p, q));
                assert_eq!(a["hits"], b["hits"], "{p} {q:?}");
                assert_eq!(a["reranker"], b["reranker"], "{p} {q:?}");
                assert_eq!(a["fusion"], b["fusion"], "{p} {q:?}");
                assert_eq!(a["total_hits"], b["total_hits"], "{p} {q:?}");
                compared += a["hits"].as_array().unwrap().len();
            }
        }
        compared
    };
    let params = [
        "k=30&boost=pagerank&boost_weight=0.7&window=40&fields=",
        "k=10",
        "k=5&offset=10&window=50",
        "k=10&explain=true",
        "k=6&offset=2&boost=pagerank&explain=true&fields=title",
        "k=8&collapse=site,near_duplicate&window=60",
        "k=8&rerank=false&collapse=page&explain=true",
        "k=10&model=fusion&inputs=bm25f,lm,bm25prox&fusion=rrf&explain=true",
        "k=7&offset=3&model=fusion&inputs=bm25,f2exp&fusion=combmnz&rerank=false",
    ];
    let compared = compare(&root, &params);
    assert!(compared > 150, "only {compared} hits compared");
    // SimRank needs the whole graph: a leaf says so instead of answering from its part.
    let similar = get(&format!("{}/similar?doc=p1", leaves[0].base), None);
    assert_eq!(similar.status, 503, "{}", similar.body);
    assert_eq!(
        similar.body["error"]["code"], "sharded_link_graph",
        "{}",
        similar.body
    );
    assert_eq!(
        get(&format!("{}/similar?doc=p1", one.base), None).status,
        200
    );
    // A root neither: a 501 with the reason.
    let similar = get(&format!("{}/similar?doc=p1", root.base), None);
    assert_eq!(similar.status, 501, "{}", similar.body);
    assert_eq!(similar.body["error"]["code"], "sharded_link_graph");

    // A reranker reading the RM3 features too: the root estimates the relevance model from
    // the merged window's feedback documents and ships it to the leaves.
    let rm3_model = dir.path().join("rm3.json");
    let features = "first_phase.score,bm25f,rm3.bm25,rm3.bm25f,rm3.expansion_bm25,\
                    rm3.centroid_cosine,link.in_graph,window.hits_authority";
    let rm3 = train_model(
        &single,
        &qpath,
        &rpath,
        3,
        &["--features", features],
        &rm3_model,
    );
    assert!(rm3.to_string().contains("rm3.centroid_cosine"));
    let rm3_id = rm3["id"].as_str().unwrap().to_string();
    activate(&one, &rm3_model, &rm3_id);
    drop(root);
    let root = start_root(&leaves, &rm3_model);
    let compared = compare(&root, &params[1..]);
    assert!(compared > 50, "only {compared} hits compared");
    // The expansion terms' statistics from the shards' tables.
    let table_root = start_root_with(&leaves, &rm3_model, &["--stats", "table"]);
    assert!(compare(&table_root, &params) > 150);
    assert_eq!(
        search(&root.base, "k=3", "shock wave")["reranker"],
        rm3_id.as_str()
    );
    let rm3_scores = search(&one.base, "k=10", "shock wave");
    assert_eq!(rm3_scores["reranker"], rm3_id.as_str());
}

/// The graph job through a root (issue 31, deliverable 6): each shard's leaf stores the part
/// `rankd graph` stores over the collection's directory, bit for bit, and serves it at once
/// (a PageRank-boosted search through the root equals the single index's); a TrustRank seed
/// that is no document is refused with nothing stored.
#[test]
fn a_graph_job_through_the_root_stores_what_rankd_graph_stores() {
    let dir = tempfile::tempdir().unwrap();
    let (_, lines) = linked_docs();
    let input = dir.path().join("docs.jsonl");
    std::fs::write(&input, lines.join("\n")).unwrap();
    let (single, oracle, served) = (
        dir.path().join("single"),
        dir.path().join("oracle"),
        dir.path().join("served"),
    );
    for (data, shards) in [(&single, None), (&oracle, Some(3)), (&served, Some(3))] {
        ingest_into("jsonl", &input, data, shards);
    }
    for data in [&single, &oracle] {
        rankd_ok(["graph", "--json", "--data-dir", data.to_str().unwrap()]);
    }
    let db = fresh_database(dir.path());
    let one = start(&single, &db, Some(TOKEN));
    let leaves: Vec<Server> = (0..3)
        .map(|s| {
            let data = served.join(format!("shards/{s}"));
            let args = ["--role", "leaf", "--data-dir", data.to_str().unwrap()];
            start_serve(&args, Some(TOKEN), &[])
        })
        .collect();
    let mut args = vec!["--role", "root"];
    for leaf in &leaves {
        args.extend(["--shard", leaf.base.as_str()]);
    }
    let root = start_serve(&args, Some(TOKEN), &[]);
    let graph = |body: &str| post_json(&format!("{}/admin/graph", root.base), Some(TOKEN), body);
    let refused = graph(r#"{"seeds":["p1","no-such-page"]}"#);
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(
        refused.body.to_string().contains("no-such-page"),
        "{}",
        refused.body
    );
    for s in 0..3 {
        assert!(!served.join(format!("shards/{s}/link_scores.json")).exists());
    }
    // Before the job the leaves serve no link scores.
    let scores_of = |base: &str, id: &str| {
        let a = get(&format!("{base}/doc/{id}"), None);
        assert_eq!(a.status, 200, "{}", a.body);
        a.body["link_scores"].clone()
    };
    assert_eq!(scores_of(&root.base, "p4"), Value::Null);
    // A boost by link scores the shards lack is the search's fault, a 400 naming `boost` as
    // on a single index without them, and no replica is blamed: the next searches answer.
    let p = "k=30&boost=pagerank&boost_weight=0.7&window=40&fields=&rerank=false";
    for _ in 0..3 {
        let a = get(&format!("{}/search?{p}&q=mach", root.base), None);
        assert_error(&a, 400, Some("boost"), "no link scores");
    }
    let plain = get(&format!("{}/search?q=mach&k=5", root.base), None);
    assert_eq!(plain.status, 200, "{}", plain.body);
    let boosted = |base: &str, q: &str| {
        let p = "k=30&boost=pagerank&boost_weight=0.7&window=40&fields=&rerank=false";
        let url = format!(
            "{base}/search?{p}&q={}",
            percent_encoding::utf8_percent_encode(q, percent_encoding::NON_ALPHANUMERIC)
        );
        let a = get(&url, None);
        assert_eq!(a.status, 200, "{}", a.body);
        a.body["hits"].clone()
    };
    let queries = ["shock wave", "boundary layer", "mach"];
    let started = graph("");
    assert_eq!(started.status, 202, "{}", started.body);
    let job = wait_for_job_with(&root.base, TOKEN, started.body["job"].as_i64().unwrap());
    assert_eq!(job["status"], "succeeded", "{job}");
    assert_eq!(job["progress"], 1.0, "{job}");
    let done = &job["result"];
    let shards = done["shards"].as_array().unwrap();
    assert_eq!(shards.len(), 3, "{done}");
    for (s, shard) in shards.iter().enumerate() {
        assert_eq!(shard["written_on"].as_array().unwrap().len(), 1, "{done}");
        let open = |d: &Path| {
            let index = rankd::text::TextIndex::open(&d.join(format!("shards/{s}")), None).unwrap();
            rankd::links::load(&index).unwrap().unwrap().scores
        };
        let (want, got) = (open(&oracle), open(&served));
        assert_eq!(shard["nodes"], want.n(), "{done}");
        assert!(
            want == got,
            "shard {s}: the stored part differs from rankd graph's"
        );
    }
    // A leaf refuses another shard's part, at its own generation.
    let docs = post_json(
        &format!("{}/cluster/v1/link_docs", leaves[0].base),
        Some(CLUSTER_KEY),
        &format!(r#"{{"protocol":{}}}"#, rankd::cluster::wire::PROTOCOL),
    );
    assert_eq!(docs.status, 200, "{}", docs.body);
    let other = {
        let index = rankd::text::TextIndex::open(&oracle.join("shards/1"), None).unwrap();
        rankd::links::load(&index).unwrap().unwrap().scores
    };
    let call = serde_json::json!({
        "protocol": rankd::cluster::wire::PROTOCOL,
        "generation": docs.body["generation"],
        "scores": other,
    });
    let refused = post_json(
        &format!("{}/cluster/v1/links", leaves[0].base),
        Some(CLUSTER_KEY),
        &call.to_string(),
    );
    assert_error(&refused, 400, Some("scores"), "documents");
    for id in ["p4", "p34", "p299"] {
        let want = scores_of(&one.base, id);
        assert_ne!(want, Value::Null);
        assert_eq!(want, scores_of(&root.base, id), "{id}");
    }
    for q in queries {
        assert_eq!(boosted(&one.base, q), boosted(&root.base, q), "{q:?}");
    }
}
