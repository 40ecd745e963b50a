//! The fuzz targets' bodies, one function per target of `fuzz_targets/` (each a one-line
//! wrapper for libFuzzer): written here once so that `cargo test` replays every committed seed
//! corpus through the same code (`tests/suite/fuzz_corpus.rs`) without the instrumented
//! build, which the long runs of `.ci/fuzz` make (docs/RELIABILITY.md).
//!
//! Each function is given the fuzzer's bytes and panics when a promise is broken.

use std::sync::OnceLock;

use rankd::corpus::cranfield::{self, Judgments};
use rankd::eval::trec;
use rankd::rerank::gbdt::import::Library;
use rankd::text::config::Analyzer;
use rankd::text::query::{check_query_text, QueryTerms};

use super::{leaf, scratch, scratch_file, server};

/// Admin request bodies: the first byte chooses the route, the rest is the body, sent with
/// the admin token to rankd's router (fuzz/src/lib.rs): judgments (JSON and qrels text),
/// queries, seeds, evaluation, label batches, deletions; and the training settings of
/// `POST /admin/train`, checked without starting a job. No input may panic or answer 5xx,
/// and every error is the documented JSON.
pub fn admin_bodies(data: &[u8]) {
    let Some((&route, body)) = data.split_first() else {
        return;
    };
    let (path, content_type) = match route % 8 {
        0 => ("/admin/judgments", "application/json"),
        1 => ("/admin/judgments/qrels", "text/plain"),
        2 => ("/admin/queries", "text/plain"),
        3 => ("/admin/seeds", "application/json"),
        4 => ("/admin/evaluate", "application/json"),
        5 => ("/admin/label-batch", "application/json"),
        6 => ("/admin/documents/delete", "application/json"),
        _ => {
            if let Ok(params) = serde_json::from_slice::<rankd::admin::train::TrainParams>(body) {
                let _ = params.request();
            }
            return;
        }
    };
    server().send("POST", path, content_type, body.to_vec());
}

const CALLS: [&str; 8] = [
    "stats",
    "table",
    "query",
    "features",
    "feedback",
    "hits",
    "link_docs",
    "links",
];

/// The generation the leaf's current searcher has (its index never changes here).
fn pinned() -> u64 {
    static GENERATION: OnceLock<u64> = OnceLock::new();
    *GENERATION.get_or_init(|| {
        let call = serde_json::json!({
            "protocol": rankd::cluster::wire::PROTOCOL,
            "request": {"terms": {}, "cf": false},
        });
        let (status, body) = leaf().send(
            "POST",
            "/cluster/v1/stats",
            "application/json",
            call.to_string().into_bytes(),
        );
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let reply: serde_json::Value = serde_json::from_slice(&body).expect("a JSON reply");
        reply["generation"].as_u64().expect("a generation")
    })
}

/// The cluster wire as a leaf receives it: the first byte chooses the call
/// (`/cluster/v1/stats`, `table`, `query`, `features`, `feedback`, `hits`), the rest is its
/// JSON body, sent with the cluster key to a leaf's router over the small index of
/// fuzz/src/lib.rs. The first byte's high bit replaces the body's `generation` by the one
/// the leaf pinned (a generation is random per process, so the seeds could not name it), so
/// that inputs reach past the pin. No input may panic, abort or answer 5xx, and every error
/// is the documented JSON. (The leaf's writes are `/admin/documents`'s handlers, fuzzed by
/// `admin_bodies`.)
pub fn cluster_wire(data: &[u8]) {
    let Some((&choice, body)) = data.split_first() else {
        return;
    };
    let route = CALLS[usize::from(choice & 0x7f) % CALLS.len()];
    let mut body = body.to_vec();
    if choice & 0x80 != 0 {
        if let Ok(serde_json::Value::Object(mut call)) = serde_json::from_slice(&body) {
            if call.contains_key("generation") {
                call.insert("generation".into(), pinned().into());
                body = serde_json::to_vec(&call).expect("a JSON object serialises");
            }
        }
    }
    let uri = format!("/cluster/v1/{route}");
    leaf().send("POST", &uri, "application/json", body);
}

/// The Cranfield readers (`cran.all.1400`, `cran.qry`, `cranqrel`): any file is parsed or
/// refused with an error, never a panic.
pub fn cranfield(data: &[u8]) {
    let path = scratch_file("cran", data);
    let _ = cranfield::read_documents(&path);
    let _ = cranfield::read_queries(&path);
    let _ = cranfield::read_qrels(&path, Judgments::A);
    let _ = cranfield::read_qrels(&path, Judgments::B);
}

/// HTML ingest: the input is split at the first NUL byte into two pages, `index.html` and
/// `b/page.html` (so links, anchors and redirects between them are exercised), read the way
/// `rankd ingest --format html` reads a directory. No panic, whatever the markup.
pub fn html(data: &[u8]) {
    let (first, second) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b""[..]),
    };
    let dir = scratch().join("site");
    let files = [
        scratch_file("site/index.html", first),
        scratch_file("site/b/page.html", second),
    ];
    let base = url::Url::parse("https://example.org/docs/").unwrap();
    let corpus = rankd::corpus::html::read_pages(&dir, &files, &base, Default::default(), &|| {});
    assert!(corpus.documents.len() + corpus.errors.len() + corpus.redirects <= 2);
}

const TAGS: &[&str] = &[
    "<div>",
    "<span>",
    "<b>",
    "<i>",
    "<a href=x>",
    "<p>",
    "<li>",
    "<table>",
    "<td>",
    "<tr>",
    "<ul>",
    "<svg>",
    "<math>",
    "<nav>",
    "</div>",
    "</b>",
    "</p>",
    "</span>",
    "text ",
];

/// HTML nesting (issue 30, N4): the input is a program of runs, two bytes each — a tag
/// chosen from elements that nest differently in the HTML tree builder (block, inline,
/// formatting, table, list, `p`) and a run length of up to 64 × 255 — expanded into a page of
/// deeply nested, mis-nested and unclosed elements, read as `rankd ingest --format html`
/// reads a directory. No panic, no stack overflow, and the page is a document or an invalid
/// record naming its depth. Run with `-timeout=10`: the reader must stay near-linear.
pub fn html_nesting(data: &[u8]) {
    let mut page = String::from("<html><body>");
    for run in data.chunks(2) {
        let tag = TAGS[usize::from(run[0]) % TAGS.len()];
        let times = 1 + 64 * usize::from(run.get(1).copied().unwrap_or(0));
        if page.len() + tag.len() * times > 4 << 20 {
            break;
        }
        page.push_str(&tag.repeat(times));
    }
    let dir = scratch().join("nest");
    let files = [scratch_file("nest/index.html", page.as_bytes())];
    let base = url::Url::parse("https://example.org/").unwrap();
    let corpus = rankd::corpus::html::read_pages(&dir, &files, &base, Default::default(), &|| {});
    assert_eq!(corpus.documents.len() + corpus.errors.len(), 1);
    if let Some(e) = corpus.errors.first() {
        assert!(e.message.contains("nest"), "{}", e.message);
    }
}

/// JSONL ingest (`rankd ingest --format jsonl` and admin document batches parse the same way):
/// any bytes give documents or errors naming a line, never a panic; a document that parses
/// also converts into the index's form.
pub fn jsonl(data: &[u8]) {
    let lines = data.split(|&b| b == b'\n').count();
    for record in rankd::corpus::jsonl::parse(std::path::Path::new("fuzz.jsonl"), data) {
        if let Err(e) = record {
            let line = e.line.expect("an error names its line");
            assert!(line >= 1 && line <= lines, "line {line} of {lines}");
        }
    }
}

/// LETOR / SVMlight files (`rankd train --letor`, `rankd eval-letor`): any file is read or
/// refused with an error, and one that reads becomes a training set (the dense feature
/// matrix) without a panic or an allocation sized by a hostile feature index (issue 16,
/// item 4). The first byte chooses between `qid:` groups and a group-size file.
pub fn letor(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let (rows, groups) = if mode % 2 == 0 {
        (rest, None)
    } else {
        // The group sizes come first, up to a NUL byte.
        match rest.iter().position(|&b| b == 0) {
            Some(i) => (&rest[i + 1..], Some(&rest[..i])),
            None => (rest, Some(&b"1\n"[..])),
        }
    };
    let path = scratch_file("letor.txt", rows);
    let groups = groups.map(|g| scratch_file("letor.txt.query", g));
    if let Ok(set) = rankd::corpus::letor::read(&path, groups.as_deref()) {
        let _ = rankd::rerank::RankSet::from_letor(&set);
    }
}

/// A RankLib model whose one tree is a chain `depth` splits deep.
fn chain(depth: usize, feature: u8) -> Vec<u8> {
    let mut s =
        String::from("## LambdaMART\n<ensemble>\n<tree id=\"1\" weight=\"0.5\">\n<split>\n");
    for k in 0..depth {
        let f = 1 + (usize::from(feature) + k) % 8;
        s.push_str(&format!(
            "<feature> {f} </feature><threshold> {k} </threshold>\
             <split pos=\"left\"><output> {k} </output></split><split pos=\"right\">\n"
        ));
    }
    s.push_str("<output> 1 </output>\n");
    s.push_str(&"</split>\n".repeat(depth + 1));
    s.push_str("</tree>\n</ensemble>\n");
    s.into_bytes()
}

/// Model files in every format rankd reads: rankd JSON, XGBoost JSON, LightGBM text and
/// RankLib XML, through each reader and through `POST /admin/models`'s upload check (format
/// detection, validation, binding to the feature set). No panic; a model that is accepted
/// scores a row of the current feature set with finite scores and explains it (TreeSHAP for
/// trees, which `explain=true` runs).
///
/// An input opening with `DEEP` is a program instead (issue 30, N1/N2): a depth (two bytes,
/// up to 65 535) and a feature byte make a RankLib chain that deep, so the reader and the
/// explanation meet nesting no mutation of a small seed reaches.
pub fn model(data: &[u8]) {
    let generated;
    let data = match data.strip_prefix(b"DEEP") {
        Some([hi, lo, feature, ..]) => {
            generated = chain(usize::from(u16::from_be_bytes([*hi, *lo])), *feature);
            &generated[..]
        }
        _ => data,
    };
    let _ = rankd::rerank::Reranker::from_json(data);
    for library in [Library::Xgboost, Library::Lightgbm, Library::Ranklib] {
        let _ = library.parse(data);
    }
    if let Ok(model) = rankd::admin::models::read_upload(data, None) {
        let width = model.num_features();
        let scores = model.score(&vec![0.5; width * 2], 2);
        if let Ok(scores) = scores {
            assert_eq!(scores.len(), 2);
            assert!(scores.iter().all(|s| s.is_finite()), "{scores:?}");
        }
        let _ = model.contributions(&vec![0.5; width]);
    }
}

/// Query analysis: any text through every analyzer, and the query-text check the API applies
/// first. Neither may panic; analysis of accepted text must not fail.
pub fn query(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let accepted = check_query_text(text).is_ok();
    for analyzer in [Analyzer::EnStem, Analyzer::En, Analyzer::Plain] {
        let analyzed = QueryTerms::analyze(text, analyzer);
        if accepted {
            if let Ok(terms) = analyzed {
                let _ = terms.len_with_repeats();
            }
        }
    }
}

/// The public API's query strings: the input is sent as the query string of `/search`,
/// `/similar`, `/` and `/doc/…` to rankd's router (fuzz/src/lib.rs) over a small index with
/// link scores. No input may panic or answer 5xx, and every error is the documented JSON.
pub fn search_params(data: &[u8]) {
    let Some((&route, query)) = data.split_first() else {
        return;
    };
    let Ok(query) = std::str::from_utf8(query) else {
        return;
    };
    let uri = match route % 4 {
        0 | 1 => format!("/search?{query}"),
        2 => format!("/similar?{query}"),
        _ => format!("/doc/{query}"),
    };
    server().send("GET", &uri, "text/plain", Vec::new());
}

/// TREC run and qrels readers (`rankd eval`, `POST /admin/judgments/qrels`): any text is
/// parsed or refused with an error naming its line, never a panic; a run that parses writes
/// back and reads again to the same run.
pub fn trec(data: &[u8]) {
    let path = std::path::Path::new("fuzz.trec");
    if let Ok(run) = trec::parse_run(data, path) {
        let mut text = Vec::new();
        trec::write_run(&mut text, &run, "fuzz").unwrap();
        let again = trec::parse_run(&text[..], path).expect("a written run reads back");
        assert_eq!(again.num_queries(), run.num_queries());
    }
    if let Ok(qrels) = trec::parse_qrels(data, path) {
        let mut text = Vec::new();
        trec::write_qrels(&mut text, &qrels).unwrap();
        let again = trec::parse_qrels(&text[..], path).expect("written qrels read back");
        assert_eq!(again.num_judgments(), qrels.num_judgments());
    }
}
